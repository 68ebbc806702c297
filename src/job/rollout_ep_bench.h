// One rollout instance's generation rate under each EP backend, for `moerl bench rl-ep`: the
// instance's ranks (rollout.ep_size of them, under `moerl launch`) hold the job's starting
// policy once (random weights of [model], or its checkpoint; the rollout dtype and device),
// viewed through one EP group per backend, and generate `batches` timed batches of
// runtime.tasks_per_lease prompt groups of the task, spread over the ranks as an instance
// spreads a lease (unit i to rank i mod M), in lockstep. Every backend generates the same
// prompts with the same seeds; the backends' order alternates by round, so a drifting host
// favours none.
//
//   nlohmann::json r = bench_rollout_instance(cfg, {.backends = {"fabric", "alltoall"}});
//   // rank 0: r["backends"]["fabric"]["tokens_per_s"], ...; other ranks: null
// Collective over the launch's ranks. Failures: moerl::Error (config, a dead peer).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "job/job_config.h"

namespace moerl::job {

struct RolloutEpBenchOptions {
  std::vector<std::string> backends;  // [ep] backend names; the first is the path under test
  int rounds = 3;
  int batches = 4;       // timed batches per backend and round
  int warmup = 1;        // untimed batches before them
  uint64_t seed = 1;
};

// Rank 0: {"ranks", "tasks_per_lease", "group_size", "backends": {name: {"tokens", "seconds",
// "tokens_per_s" (summed over rounds), "rounds": [tokens/s of each]}}}; null elsewhere.
nlohmann::json bench_rollout_instance(const JobConfig& cfg, const RolloutEpBenchOptions& options);

}  // namespace moerl::job
