// The job's entry points, one per way it is started:
//   run_job            `moerl train`: sync (the trainer generates in line) or, with
//                      runtime.mode = "async", the trainer and rollout.num_workers workers on
//                      this machine (job/local_launcher.h);
//   run_trainer_role   `moerl trainer`: the async trainer over the queue [runtime] names;
//                      ep.size ranks under `moerl launch` are ONE trainer group;
//   run_rollout_role   `moerl rollout`: one rollout worker (a pod of the rollout Deployment):
//                      a process, or rollout.ep_size ranks under `moerl launch` forming one
//                      instance (rollout/instance.h); SIGTERM or a Spot notice drains it.
//
//   JobConfig cfg = JobConfig::load("examples/demo.toml", {});
//   nlohmann::json summary = run_job(cfg, {.run_dir = "runs/demo"});
//   int rc = run_rollout_role(cfg, {.run_dir = "runs/a", .worker_id = "pod-3"});
// One job per process (the trainer owns the run dir). Failures: moerl::Error; committed
// checkpoints stay valid and a rerun resumes with no task trained twice.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "job/job_config.h"
#include "job/queue_source.h"
#include "job/run_context.h"
#include "rollout/worker.h"

namespace moerl::job {

nlohmann::json run_job(const JobConfig& cfg, const JobOptions& options);

// The async trainer over `backends`; empty options.backends: opened from cfg.runtime.
nlohmann::json run_trainer_role(const JobConfig& cfg, const JobOptions& options, QueueSourceOptions source = {});

struct RolloutRoleOptions {
  std::string run_dir = "runs/latest";  // where the store lives unless [store] uri is set
  std::string worker_id = "worker-0";
  int64_t max_tasks = 0;
  int intra_op_threads = 1;
};
// Returns the process exit code (0 after a drain or the end of the run).
int run_rollout_role(const JobConfig& cfg, const RolloutRoleOptions& options);

// The rollout worker's setup from the job config (tokenizer and reward borrowed from the caller).
rollout::WorkerSetup worker_setup(const JobConfig& cfg, const model::Tokenizer& tok);

}  // namespace moerl::job
