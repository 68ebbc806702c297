// The asynchronous, disaggregated job: the TRAINER role (AsyncController keeps the task queue
// topped up and hands out fresh-enough experience; each step trains with the behaviour
// correction, publishes weight version v+1 and checkpoints the buffer snapshot + queue
// cursor), the ROLLOUT role (rollout/worker.h), and `moerl train --mode async`, which runs
// one trainer and rollout.num_workers workers locally: threads over in-process backends
// (the default), or child processes (`moerl rollout`) when runtime.queue_url is Redis.
//
//   JobConfig cfg = JobConfig::load("examples/async.toml", {});
//   nlohmann::json s = run_async_job(cfg, {.run_dir = "runs/async"});   // local, all roles
//   nlohmann::json t = run_trainer_role(cfg, {.run_dir = "runs/a"});     // `moerl trainer`
//   int rc = run_rollout_role(cfg, {.run_dir = "runs/a", .worker_id = "pod-3"});  // `moerl rollout`
// One job per process (the trainer owns the run dir). Failures: moerl::Error; committed
// checkpoints stay valid and a restarted trainer resumes with no task trained twice.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>

#include <memory>
#include <string>

#include "model/tokenizer.h"
#include "rollout/weight_handoff.h"
#include "runtime/runtime_config.h"
#include "train/job.h"
#include "train/job_config.h"

namespace moerl::train {

// The tokenizer the job uses ([model] init: "random" -> character tokenizer, else the
// directory's tokenizer).
std::unique_ptr<model::Tokenizer> make_job_tokenizer(const JobConfig& cfg);
// [store] uri, or <run_dir>/store.
std::string job_store_uri(const JobConfig& cfg, const std::string& run_dir);

// The trainer role over `backends` (opened by the caller; in-process backends are shared
// with worker threads). Writes metrics.jsonl, trained.jsonl (one line per trained task),
// summary.json (with "accounting"), checkpoints; marks the run done in the store at the end.
// `before_report` (may be empty) runs after the last step, before the accounting report
// (the local launcher stops its workers there so their times are counted). With a
// `handoff` (every worker a thread of this process), versions go to the workers in memory;
// without one, through the object store.
nlohmann::json run_trainer(const JobConfig& cfg, const JobOptions& options, runtime::RuntimeBackends backends,
                           const std::function<void()>& before_report = {},
                           std::shared_ptr<rollout::WeightHandoff> handoff = nullptr);

// `moerl trainer`: opens the backends the config names and runs the trainer role.
nlohmann::json run_trainer_role(const JobConfig& cfg, const JobOptions& options);

struct RolloutRoleOptions {
  std::string run_dir = "runs/latest";  // where the store lives unless [store] uri is set
  std::string worker_id = "worker-0";
  int64_t max_tasks = 0;
  int intra_op_threads = 1;
};
// `moerl rollout`: one worker process; SIGTERM (and a Spot notice if enabled) drains it.
// Returns the process exit code (0 after a drain or the end of the run).
int run_rollout_role(const JobConfig& cfg, const RolloutRoleOptions& options);

// `moerl train --mode async`: trainer + rollout.num_workers workers on this machine.
nlohmann::json run_async_job(const JobConfig& cfg, const JobOptions& options);

}  // namespace moerl::train
