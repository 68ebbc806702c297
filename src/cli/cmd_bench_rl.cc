// `moerl bench rl CONFIG.toml [--set key=value ...] [--run-dir DIR] [--json]`: the same job in
// sync (1 thread, then one per core) and async mode on this machine (same config, same number
// of RL steps and thus trained samples); reports samples/s, tokens/s, the ratio of async to the
// faster sync run, and the final held-out reward; --repeat N alternates the order over N
// rounds and reports medians.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "base/error.h"
#include "base/files.h"
#include "base/log.h"
#include "cli/bench.h"
#include "job/roles.h"

namespace moerl::cli {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}

// Both modes define these the same way (job/trainer_loop.h): per second of RL steps.
double samples_per_s(const nlohmann::json& summary) { return summary["throughput"]["samples_per_s"].get<double>(); }
double response_tokens_per_s(const nlohmann::json& summary) {
  return summary["throughput"]["response_tokens_per_s"].get<double>();
}
double final_reward(const nlohmann::json& summary) { return summary["eval"]["final"].get<double>(); }

}  // namespace

static int run_bench_rl(Args& a) {
  if (a.flag("--help") || a.flag("-h")) {
    std::printf(
        "usage: moerl bench rl CONFIG.toml [--set key=value ...] [--run-dir runs/bench-rl] [--repeat N] [--json]\n"
        "Runs CONFIG in sync mode (at 1 intra-op thread and at one per core), then in async mode\n"
        "(runtime.stale_policy = regenerate so all train the same samples), fresh run dirs under DIR.\n"
        "Reports samples/s and trained response tokens/s of each (per second of RL steps: experience\n"
        "+ training + publication, evaluation and checkpoints excluded, the same in both modes),\n"
        "final eval reward, and\n"
        "ratio = async samples/s / the faster sync run's samples/s.\n"
        "--repeat N runs N rounds, every other one in reverse order (async first), and reports the\n"
        "median per-round ratio: a host whose speed drifts then favours neither mode. Round r > 0\n"
        "uses train.seed + r (the RL sampling seed).\n"
        "equal_reward: |async - sync final reward| within 2 standard errors of the held-out means.\n");
    return 0;
  }
  std::vector<std::string> user = a.values("--set");
  std::string dir = a.value_or("--run-dir", "runs/bench-rl");
  const int64_t repeat = a.integer("--repeat", 1);
  const bool json = a.flag("--json");
  std::string config = a.positional(0, "CONFIG.toml");
  a.finish();
  if (repeat < 1 || repeat > 100) {
    throw Error("bench rl: --repeat " + std::to_string(repeat) + " is out of range", "use 1..100",
                ErrorCode::kInvalidInput);
  }
  // Rounds after the first shift train.seed (the RL sampling seed), so the rounds' final rewards
  // differ by sampling as the equal_reward check assumes (the SFT start is the same).
  const uint64_t base_seed = job::JobConfig::load(config, user).train.seed;
  auto run = [&](const std::string& mode, int threads, int64_t round) {
    std::vector<std::string> o = {"runtime.stale_policy=\"regenerate\""};
    o.insert(o.end(), user.begin(), user.end());
    if (round > 0) o.push_back("train.seed=" + std::to_string(base_seed + static_cast<uint64_t>(round)));
    o.push_back("runtime.mode=\"" + mode + "\"");
    if (threads > 0) o.push_back("train.threads=" + std::to_string(threads));
    job::JobConfig cfg = job::JobConfig::load(config, o);
    job::JobOptions opts;
    std::string name = threads > 0 ? mode + "-" + std::to_string(threads) : mode;
    if (repeat > 1) name += "-r" + std::to_string(round);
    opts.run_dir = (std::filesystem::path(dir) / name).string();
    opts.resume = false;
    opts.fresh = true;  // each round on its own: also over a Redis queue's namespace
    opts.plot = false;
    remove_tree(opts.run_dir);
    MOERL_LOG(INFO) << "bench rl: round " << round + 1 << "/" << repeat << ", " << mode << " run in " << opts.run_dir;
    nlohmann::json summary = job::run_job(cfg, opts);
    summary["run_dir"] = opts.run_dir;
    return summary;
  };
  // Sync is run at 1 intra-op thread and at one per core, and the faster is each round's
  // baseline: on small models a second thread can cost more than it gives.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<int> sync_threads = {1};
  if (cores > 1) sync_threads.push_back(cores);
  std::vector<std::vector<nlohmann::json>> syncs(sync_threads.size());  // [threads][round]
  std::vector<nlohmann::json> asyncs;
  std::vector<double> ratios;
  for (int64_t round = 0; round < repeat; ++round) {
    auto run_syncs = [&] {
      for (size_t i = 0; i < sync_threads.size(); ++i) syncs[i].push_back(run("sync", sync_threads[i], round));
    };
    if (round % 2 == 0) run_syncs();
    asyncs.push_back(run("async", 0, round));
    if (round % 2 == 1) run_syncs();
    double best = 0;
    for (const auto& per_threads : syncs) best = std::max(best, samples_per_s(per_threads.back()));
    ratios.push_back(samples_per_s(asyncs.back()) / std::max(1e-9, best));
  }
  // Per sync variant: medians over rounds; the baseline is the variant with the higher median.
  nlohmann::json sync_runs = nlohmann::json::array();
  size_t best = 0;
  std::vector<double> best_rewards;
  for (size_t i = 0; i < syncs.size(); ++i) {
    std::vector<double> sps, tps, rew;
    for (const auto& s : syncs[i]) {
      sps.push_back(samples_per_s(s));
      tps.push_back(response_tokens_per_s(s));
      rew.push_back(final_reward(s));
    }
    sync_runs.push_back({{"threads", sync_threads[i]}, {"samples_per_s", median(sps)}, {"tokens_per_s", median(tps)},
                         {"final_reward", mean(rew)}});
    if (median(sps) > sync_runs[best]["samples_per_s"].get<double>()) best = i;
  }
  for (const auto& s : syncs[best]) best_rewards.push_back(final_reward(s));
  std::vector<double> a_sps, a_tps, a_rew;
  for (const auto& y : asyncs) {
    a_sps.push_back(samples_per_s(y));
    a_tps.push_back(response_tokens_per_s(y));
    a_rew.push_back(final_reward(y));
  }
  // Held-out rewards are means over eval_prompts prompts (rewards in [0, 1]): the standard
  // error of one run's mean is at most sqrt(p (1 - p) / n); two modes, `repeat` runs each.
  const nlohmann::json& y = asyncs.back();
  const double n = std::max(1.0, y["eval"]["num_prompts"].get<double>());
  const double p = std::clamp(0.5 * (mean(a_rew) + mean(best_rewards)), 0.0, 1.0);
  const double noise = 2.0 * std::sqrt(std::max(p * (1 - p), 0.01) * 2.0 / (n * static_cast<double>(repeat)));
  const double gap = mean(a_rew) - mean(best_rewards);
  nlohmann::json r = {
      {"config", config},
      {"repeat", repeat},
      {"sync", sync_runs[best]},
      {"sync_runs", sync_runs},
      {"async", {{"samples_per_s", median(a_sps)}, {"tokens_per_s", median(a_tps)},
                 {"final_reward", mean(a_rew)}, {"rl_steps", y["steps"]["rl"]},
                 {"samples", y["throughput"]["samples"]}, {"num_workers", y["num_workers"]},
                 {"stale_dropped", y["accounting"].value("stale_dropped", 0)},
                 {"groups_filtered", y["accounting"].value("groups_filtered", 0)},
                 {"staleness_histogram", y["accounting"].value("staleness_histogram", nlohmann::json::object())}}},
      {"ratios", ratios},
      {"ratio", median(ratios)},
      {"reward_gap", gap},
      {"reward_noise_2se", noise},
      {"equal_reward", std::abs(gap) <= noise}};
  if (json) {
    std::printf("%s\n", r.dump().c_str());
  } else {
    std::printf("mode             samples/s   tokens/s   final reward   (medians over %lld round%s)\n",
                static_cast<long long>(repeat), repeat > 1 ? "s" : "");
    for (const auto& j : sync_runs) {
      std::printf("sync %2d thread%s %9.1f  %9.1f   %.3f\n", j["threads"].get<int>(), j["threads"].get<int>() > 1 ? "s" : " ",
                  j["samples_per_s"].get<double>(), j["tokens_per_s"].get<double>(), j["final_reward"].get<double>());
    }
    std::printf("async           %9.1f  %9.1f   %.3f\n", median(a_sps), median(a_tps), mean(a_rew));
    std::printf("ratio (async / best sync samples/s): %.2f", median(ratios));
    if (repeat > 1) {
      std::printf("  (rounds:");
      for (double x : ratios) std::printf(" %.2f", x);
      std::printf(")");
    }
    std::printf("\nfinal reward, async - sync: %+.3f (2 standard errors: %.3f): %s\n", gap, noise,
                std::abs(gap) <= noise ? "equal within noise" : "NOT equal within noise");
  }
  return 0;
}

MOERL_BENCH("rl", "sync vs async RL job: samples/s, tokens/s, ratio, final reward", run_bench_rl);

}  // namespace moerl::cli
