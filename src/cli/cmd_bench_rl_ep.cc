// `moerl bench rl-ep CONFIG.toml [--set k=v ...] [--instances 2] [--ranks 2] [--baseline B]
// [--rounds 3] [--batches 4] [--run-dir DIR] [--json]`: the reference system's experiment in
// moerl's shape. It starts --instances rollout instances of --ranks ranks each at once
// (`moerl launch -n R` per instance, as the manifests start them), each generating the same
// prompt groups with its experts sharded over its ranks, under [ep] backend (moerl's
// dispatch/combine) and under the all-to-all baseline in alternating order; it prints the
// instances' aggregate rollout tokens/s for each and the ratio. (A process started with
// --instance-out is one such instance: job/rollout_ep_bench.h.)
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "base/deadline.h"
#include "base/error.h"
#include "base/files.h"
#include "base/log.h"
#include "base/subprocess.h"
#include "cli/bench.h"
#include "job/rollout_ep_bench.h"

namespace moerl::cli {

namespace {

std::string self_exe() {
  std::vector<char> buf(4096);
  const ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) throw Error("bench rl-ep: cannot find this binary (/proc/self/exe)", "run it from a normal path", ErrorCode::kIo);
  return std::string(buf.data(), static_cast<size_t>(n));
}

}  // namespace

static int run_bench_rl_ep(Args& a) {
  if (a.flag("--help") || a.flag("-h")) {
    std::printf(
        "usage: moerl bench rl-ep CONFIG.toml [--set key=value ...] [--instances 2] [--ranks 2]\n"
        "                         [--baseline alltoall|nccl] [--rounds 3] [--batches 4] [--run-dir DIR] [--json]\n"
        "Starts INSTANCES rollout instances of RANKS ranks at once (moerl launch -n RANKS each), experts sharded\n"
        "over an instance's ranks, every instance generating the same runtime.tasks_per_lease prompt groups per\n"
        "batch in lockstep, under [ep] backend (fabric on CPUs unless set; cuda_ipc on GPUs) and under the baseline\n"
        "(alltoall on CPUs, nccl on GPUs), in alternating order for ROUNDS rounds of BATCHES timed batches.\n"
        "Prints aggregate rollout tokens/s (summed over instances) of each and ratio = moerl / baseline.\n");
    return 0;
  }
  std::vector<std::string> user = a.values("--set");
  const int64_t instances = a.integer("--instances", 2), ranks = a.integer("--ranks", 2);
  std::optional<std::string> baseline = a.value("--baseline");
  job::RolloutEpBenchOptions o;
  o.rounds = static_cast<int>(a.integer("--rounds", 3));
  o.batches = static_cast<int>(a.integer("--batches", 4));
  const std::string dir = a.value_or("--run-dir", "runs/bench-rl-ep");
  std::optional<std::string> instance_out = a.value("--instance-out");
  const bool json = a.flag("--json");
  std::string config = a.positional(0, "CONFIG.toml");
  a.finish();
  if (instances < 1 || instances > 64 || ranks < 2 || ranks > 64) {
    throw Error("bench rl-ep: --instances " + std::to_string(instances) + " --ranks " + std::to_string(ranks) +
                    " out of range",
                "use 1..64 instances of 2..64 ranks (one rank has no expert parallelism to compare)");
  }
  std::vector<std::string> overrides = {"runtime.mode=\"async\"", "rollout.ep_size=" + std::to_string(ranks)};
  overrides.insert(overrides.end(), user.begin(), user.end());
  job::JobConfig cfg = job::JobConfig::load(config, overrides);
  const bool gpu = cfg.model.device != "cpu";
  const std::string ours = cfg.ep_backend == "loopback" ? (gpu ? "cuda_ipc" : "fabric") : cfg.ep_backend;
  o.backends = {ours, baseline.value_or(gpu ? "nccl" : "alltoall")};
  if (o.backends[0] == o.backends[1]) {
    throw Error("bench rl-ep: the path under test and the baseline are both " + ours, "pass --baseline or --set ep.backend");
  }
  if (instance_out) {  // one instance's rank (under moerl launch)
    nlohmann::json r = job::bench_rollout_instance(cfg, o);
    if (!r.is_null()) write_file_atomic(*instance_out, r.dump(2) + "\n");
    return 0;
  }
  std::filesystem::create_directories(dir);
  const std::string exe = self_exe();
  std::vector<Subprocess> procs;
  for (int64_t i = 0; i < instances; ++i) {
    std::vector<std::string> argv = {exe, "launch", "-n", std::to_string(ranks), "--", exe, "bench", "rl-ep", config,
                                     "--ranks", std::to_string(ranks), "--baseline", o.backends[1],
                                     "--rounds", std::to_string(o.rounds), "--batches", std::to_string(o.batches),
                                     "--instance-out", dir + "/instance-" + std::to_string(i) + ".json"};
    for (const std::string& s : user) argv.insert(argv.end(), {"--set", s});
    std::remove((dir + "/instance-" + std::to_string(i) + ".json").c_str());
    procs.push_back(Subprocess::spawn(argv, {.stdout_to = Redirect::file(dir + "/instance-" + std::to_string(i) + ".log", FileMode::kTruncate),
                                             .stderr_to = Redirect::to_stdout(),
                                             .parent_death_signal = SIGKILL}));
  }
  MOERL_LOG(INFO) << "bench rl-ep: " << instances << " instances of " << ranks << " ranks, " << o.backends[0] << " vs "
                  << o.backends[1] << "; logs in " << dir;
  nlohmann::json per_instance = nlohmann::json::array();
  double sum[2] = {0, 0};
  for (int64_t i = 0; i < instances; ++i) {
    const std::string log = dir + "/instance-" + std::to_string(i) + ".log";
    const std::optional<int> st = procs[i].wait_or_kill(Deadline::after_seconds(3600));
    if (st.value_or(-1) != 0) {
      throw Error("bench rl-ep: instance " + std::to_string(i) + " failed (status " + std::to_string(st.value_or(-1)) +
                      ")", "its log: " + log, ErrorCode::kInternal);
    }
    std::ifstream in(dir + "/instance-" + std::to_string(i) + ".json");
    nlohmann::json r = nlohmann::json::parse(in);
    for (int k = 0; k < 2; ++k) sum[k] += r["backends"][o.backends[k]]["tokens_per_s"].get<double>();
    per_instance.push_back(r);
  }
  const double ratio = sum[0] / std::max(1e-9, sum[1]);
  nlohmann::json r = {{"config", config}, {"instances", instances}, {"ranks", ranks},
                      {"device", cfg.model.device}, {"tasks_per_lease", cfg.runtime.tasks_per_lease},
                      {"group_size", cfg.loss.group_size}, {"max_new_tokens", cfg.rollout.gen.max_new_tokens},
                      {"backend", o.backends[0]}, {"baseline", o.backends[1]},
                      {"tokens_per_s", sum[0]}, {"baseline_tokens_per_s", sum[1]}, {"ratio", ratio},
                      {"per_instance", per_instance}};
  if (json) {
    std::printf("%s\n", r.dump().c_str());
  } else {
    std::printf("%lld instances x %lld ranks, %s, lease %lld groups of %lld, %lld new tokens\n",
                static_cast<long long>(instances), static_cast<long long>(ranks), cfg.model.device.c_str(),
                static_cast<long long>(cfg.runtime.tasks_per_lease), static_cast<long long>(cfg.loss.group_size),
                static_cast<long long>(cfg.rollout.gen.max_new_tokens));
    std::printf("%-10s aggregate rollout %10.1f tok/s\n%-10s aggregate rollout %10.1f tok/s\nratio (%s / %s): %.2f\n",
                o.backends[0].c_str(), sum[0], o.backends[1].c_str(), sum[1], o.backends[0].c_str(),
                o.backends[1].c_str(), ratio);
  }
  return 0;
}

MOERL_BENCH("rl-ep", "rollout instances with EP: moerl's dispatch/combine vs the all-to-all baseline", run_bench_rl_ep);

}  // namespace moerl::cli
