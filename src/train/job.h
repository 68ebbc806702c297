// The main job, `moerl train`: SFT warm start (optional), held-out evaluation, then RL
// (GRPO or PPO) steps of rollout -> reward -> train, with checkpoints through the object
// store, metrics.jsonl, a progress display, summary.json and plot.png in the run dir.
// A run dir that already holds a checkpoint resumes from it (same curve, bit for bit).
//
//   JobConfig cfg = JobConfig::load("examples/demo.toml", overrides);
//   nlohmann::json summary = run_job(cfg, {.run_dir = "runs/demo"});
// Not thread-safe; one job per process. Failures: moerl::Error; checkpoints already
// committed stay valid and the next run resumes from the newest.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "train/job_config.h"

namespace moerl::train {

struct JobOptions {
  std::string run_dir = "runs/latest";
  bool resume = true;  // resume from the newest checkpoint in the store if there is one
  bool plot = true;    // write plot.png at the end
  // Stop (after a checkpoint) once this many RL steps are done, as a preemption would;
  // the next run in the same dir resumes. 0 = run to train.steps.
  int64_t stop_after_rl_steps = 0;
};

nlohmann::json run_job(const JobConfig& cfg, const JobOptions& options);

}  // namespace moerl::train
