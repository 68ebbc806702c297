// `moerl bench rl CONFIG.toml [--set key=value ...] [--run-dir DIR] [--json]`: the same job in
// sync and then async mode on this machine (same config, same number of RL steps and thus
// trained samples); reports samples/s, tokens/s, their ratio and the final held-out reward.
#include <cstdio>
#include <filesystem>
#include <fstream>

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
        "Runs CONFIG in sync mode, then in async mode (runtime.stale_policy = regenerate so both\n"
        "train the same samples), fresh run dirs DIR/sync and DIR/async. Reports RL-loop samples/s\n"
        "and trained response tokens/s of each, ratio = async/sync samples/s, final eval reward.\n");
    return 0;
  }
  std::vector<std::string> user = a.values("--set");
  std::string dir = a.value_or("--run-dir", "runs/bench-rl");
  const bool json = a.flag("--json");
  std::string config = a.positional(0, "CONFIG.toml");
  a.finish();
  auto run = [&](const char* mode) {
    std::vector<std::string> o = {"runtime.stale_policy=\"regenerate\""};
    o.insert(o.end(), user.begin(), user.end());
    o.push_back(std::string("runtime.mode=\"") + mode + "\"");
    train::JobConfig cfg = train::JobConfig::load(config, o);
    train::JobOptions opts;
    opts.run_dir = (std::filesystem::path(dir) / mode).string();
    opts.resume = false;
    opts.plot = false;
    std::filesystem::remove_all(opts.run_dir);
    MOERL_LOG(INFO) << "bench rl: " << mode << " run in " << opts.run_dir;
    return std::string(mode) == "sync" ? train::run_job(cfg, opts) : train::run_async_job(cfg, opts);
  };
  nlohmann::json s = run("sync");
  nlohmann::json y = run("async");
  double sync_sps = s["throughput"]["samples_per_s"].get<double>();
  double async_sps = y["throughput"]["samples_per_s"].get<double>();
  nlohmann::json r = {
      {"config", config},
      {"sync", {{"samples_per_s", sync_sps}, {"tokens_per_s", sync_tokens_per_s((std::filesystem::path(dir) / "sync").string())},
                {"final_reward", s["eval"]["final"]}, {"rl_steps", s["steps"]["rl"]}}},
      {"async", {{"samples_per_s", async_sps}, {"tokens_per_s", y["throughput"]["train_tokens_per_s"]},
                 {"final_reward", y["eval"]["final"]}, {"rl_steps", y["steps"]["rl"]},
                 {"samples", y["throughput"]["samples"]}, {"num_workers", y["num_workers"]},
                 {"stale_dropped", y["accounting"].value("stale_dropped", 0)},
                 {"staleness_histogram", y["accounting"].value("staleness_histogram", nlohmann::json::object())}}},
      {"ratio", async_sps / std::max(1e-9, sync_sps)}};
  if (json) {
    std::printf("%s\n", r.dump().c_str());
  } else {
    std::printf("mode    samples/s   tokens/s   final reward\n");
    std::printf("sync    %9.1f  %9.1f   %.3f\n", sync_sps, r["sync"]["tokens_per_s"].get<double>(),
                s["eval"]["final"].get<double>());
    std::printf("async   %9.1f  %9.1f   %.3f\n", async_sps, r["async"]["tokens_per_s"].get<double>(),
                y["eval"]["final"].get<double>());
    std::printf("ratio (async/sync samples/s): %.2f\n", r["ratio"].get<double>());
  }
  return 0;
}

MOERL_BENCH("rl", "sync vs async RL job: samples/s, tokens/s, ratio, final reward", run_bench_rl);

}  // namespace moerl::cli
