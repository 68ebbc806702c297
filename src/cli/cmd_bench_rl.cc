// `moerl bench rl CONFIG.toml [--set key=value ...] [--run-dir DIR] [--json]`: the same job in
// sync (1 thread, then one per core) and async mode on this machine (same config, same number
// of RL steps and thus trained samples); reports samples/s, tokens/s, the ratio of async to the
// faster sync run, and the final held-out reward.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/files.h"
#include "base/log.h"
#include "cli/bench.h"
#include "train/async_job.h"
#include "train/job.h"

namespace moerl::cli {

namespace {

// Response tokens trained per second of the sync RL loop, from its metrics.jsonl.
double sync_tokens_per_s(const std::string& run_dir) {
  std::ifstream in(std::filesystem::path(run_dir) / "metrics.jsonl");
  double tokens = 0, seconds = 0;
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || j.value("phase", "") != "rl") continue;
    tokens += j.value("samples", 0.0) * j.value("response_len", 0.0);
    seconds += j.value("rollout_s", 0.0) + j.value("train_s", 0.0);
  }
  return tokens / std::max(1e-9, seconds);
}

}  // namespace

static int run_bench_rl(Args& a) {
  if (a.flag("--help") || a.flag("-h")) {
    std::printf(
        "usage: moerl bench rl CONFIG.toml [--set key=value ...] [--run-dir runs/bench-rl] [--json]\n"
        "Runs CONFIG in sync mode (at 1 intra-op thread and at one per core), then in async mode\n"
        "(runtime.stale_policy = regenerate so all train the same samples), fresh run dirs under DIR.\n"
        "Reports RL-loop samples/s and trained response tokens/s of each, final eval reward, and\n"
        "ratio = async samples/s / the faster sync run's samples/s.\n");
    return 0;
  }
  std::vector<std::string> user = a.values("--set");
  std::string dir = a.value_or("--run-dir", "runs/bench-rl");
  const bool json = a.flag("--json");
  std::string config = a.positional(0, "CONFIG.toml");
  a.finish();
  // Sync is run at 1 intra-op thread and at one per core, and the faster is the baseline:
  // on small models a second thread can cost more than it gives.
  auto run = [&](const std::string& mode, int threads) {
    std::vector<std::string> o = {"runtime.stale_policy=\"regenerate\""};
    o.insert(o.end(), user.begin(), user.end());
    o.push_back("runtime.mode=\"" + mode + "\"");
    if (threads > 0) o.push_back("train.threads=" + std::to_string(threads));
    train::JobConfig cfg = train::JobConfig::load(config, o);
    train::JobOptions opts;
    opts.run_dir = (std::filesystem::path(dir) / (threads > 0 ? mode + "-" + std::to_string(threads) : mode)).string();
    opts.resume = false;
    opts.plot = false;
    remove_tree(opts.run_dir);
    MOERL_LOG(INFO) << "bench rl: " << mode << " run in " << opts.run_dir;
    nlohmann::json summary = mode == "sync" ? train::run_job(cfg, opts) : train::run_async_job(cfg, opts);
    summary["run_dir"] = opts.run_dir;
    return summary;
  };
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  std::vector<nlohmann::json> syncs = {run("sync", 1)};
  if (cores > 1) syncs.push_back(run("sync", cores));
  nlohmann::json y = run("async", 0);
  auto sps = [](const nlohmann::json& j) { return j["throughput"]["samples_per_s"].get<double>(); };
  size_t best = 0;
  nlohmann::json sync_runs = nlohmann::json::array();
  for (size_t i = 0; i < syncs.size(); ++i) {
    if (sps(syncs[i]) > sps(syncs[best])) best = i;
    sync_runs.push_back({{"threads", i == 0 ? 1 : cores}, {"samples_per_s", sps(syncs[i])},
                         {"tokens_per_s", sync_tokens_per_s(syncs[i]["run_dir"].get<std::string>())},
                         {"final_reward", syncs[i]["eval"]["final"]}});
  }
  const nlohmann::json& s = syncs[best];
  double sync_sps = sps(s), async_sps = sps(y);
  nlohmann::json r = {
      {"config", config},
      {"sync", sync_runs[best]},
      {"sync_runs", sync_runs},
      {"async", {{"samples_per_s", async_sps}, {"tokens_per_s", y["throughput"]["train_tokens_per_s"]},
                 {"final_reward", y["eval"]["final"]}, {"rl_steps", y["steps"]["rl"]},
                 {"samples", y["throughput"]["samples"]}, {"num_workers", y["num_workers"]},
                 {"stale_dropped", y["accounting"].value("stale_dropped", 0)},
                 {"staleness_histogram", y["accounting"].value("staleness_histogram", nlohmann::json::object())}}},
      {"ratio", async_sps / std::max(1e-9, sync_sps)}};
  if (json) {
    std::printf("%s\n", r.dump().c_str());
  } else {
    std::printf("mode             samples/s   tokens/s   final reward\n");
    for (const auto& j : sync_runs) {
      std::printf("sync %2d thread%s %9.1f  %9.1f   %.3f\n", j["threads"].get<int>(), j["threads"].get<int>() > 1 ? "s" : " ",
                  j["samples_per_s"].get<double>(), j["tokens_per_s"].get<double>(), j["final_reward"].get<double>());
    }
    std::printf("async           %9.1f  %9.1f   %.3f\n", async_sps, r["async"]["tokens_per_s"].get<double>(),
                y["eval"]["final"].get<double>());
    std::printf("ratio (async / best sync samples/s): %.2f\n", r["ratio"].get<double>());
  }
  return 0;
}

MOERL_BENCH("rl", "sync vs async RL job: samples/s, tokens/s, ratio, final reward", run_bench_rl);

}  // namespace moerl::cli
