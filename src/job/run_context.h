// RunContext: what the trainer process of a job holds, built once by its constructor: the
// tokenizer, the policy and its PolicyTrainer, the object store, the EP group and the
// data-parallel group of a trainer group (ep.size > 1 ranks under `moerl launch`), the
// trainer state restored from the newest checkpoint, and rank 0's metrics (metrics.jsonl, and
// with [metrics] on, TensorBoard events and the Prometheus endpoint). The trainer
// loop (job/trainer_loop.h) and both experience sources (inline = sync, queue = async) work
// over one context, so setup and resume rules are written once.
//
//   RunContext ctx(cfg, {.run_dir = "runs/demo"});   // joins EP ranks, resumes if it can
//   ctx.checkpoint();                                // commits ctx.state, weights, optimizer
//   rollout::EvalResult e = ctx.eval("final");       // summed over EP ranks
// Not thread-safe; one per process. Failures: moerl::Error; a checkpoint manifest that exists
// but cannot be read is an error, never a silent fresh start.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>

#include "base/metrics_server.h"
#include "base/progress.h"
#include "ep/ep.h"
#include "job/job_config.h"
#include "job/run_metrics.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "rollout/evaluate.h"
#include "store/object_store.h"
#include "train/checkpoint.h"
#include "train/dp_sync.h"
#include "train/policy_trainer.h"

namespace moerl::job {

struct JobOptions {
  std::string run_dir = "runs/latest";
  bool resume = true;  // resume from the newest checkpoint in the store if there is one
  // `--fresh`: the run starts over. The CLI removes the run dir; an async trainer over Redis
  // that finds no checkpoint to resume also removes the earlier run's state from
  // runtime.namespace once it holds the trainer lease (runtime/namespace_reset.h).
  bool fresh = false;
  bool plot = true;    // write plot.png at the end
  // Stop (after a checkpoint) once this many RL steps are done, as a preemption would;
  // the next run in the same dir resumes. 0 = run to train.steps.
  int64_t stop_after_rl_steps = 0;
  // Intra-op threads of the trainer; 0 = train.threads (the local async launcher sets 1 so
  // the trainer and its worker threads do not fight over one pool).
  int intra_op_threads = 0;
};

inline constexpr const char* kCheckpointRoot = "ckpt";

// The tokenizer the job uses ([model] init: "random" -> character tokenizer, else the
// directory's tokenizer).
std::unique_ptr<model::Tokenizer> make_job_tokenizer(const JobConfig& cfg);
// The job's starting policy: [model] init = "random" (the arch with `tok`'s vocabulary and
// special ids, model.seed) or the checkpoint directory it names.
model::Model make_job_model(const JobConfig& cfg, const model::Tokenizer& tok, const model::ModelOptions& options);
// What that tokenizer is, for messages ("the tokenizer in DIR").
std::string tokenizer_source(const JobConfig& cfg);
// [store] uri, or <run_dir>/store.
std::string job_store_uri(const JobConfig& cfg, const std::string& run_dir);

class RunContext {
 public:
  RunContext(const JobConfig& cfg, JobOptions options);
  RunContext(const RunContext&) = delete;
  RunContext& operator=(const RunContext&) = delete;

  bool lead() const { return rank == 0; }  // rank 0 writes the run dir's files
  std::string path(const std::string& name) const;  // <run_dir>/name
  ProgressOptions progress_options(int64_t initial_step) const;
  // EP lockstep for generation (model::GenerateConfig::all_done); null on one rank.
  std::function<bool(bool)> lockstep() const;

  // Commits the state, weights and optimizer (every rank's shard under EP). Returns the prefix.
  std::string checkpoint();
  // Held-out evaluation over train.eval_prompts, each EP rank scoring its shard.
  rollout::EvalResult eval(const char* label);
  // The prefix of a committed checkpoint whose weights are the live policy's (the last
  // commit or the resumed one, if no optimizer step came after it); empty if none.
  std::string policy_commit() const;
  // kl_coef > 0: the live policy, committed as `prefix` (policy_commit()), becomes the frozen
  // KL reference; the state names the commit, so retention keeps it and a resume reloads it.
  void pin_reference(const std::string& prefix);
  // Parameters of the whole model (dense once, every EP rank's experts). Collective.
  int64_t num_parameters();
  // The policy (and a PPO run's value head) in HF layout, loadable by other tools. Collective.
  void save_final_model(const std::string& dir);

  const JobConfig& cfg;
  const JobOptions opts;
  std::unique_ptr<model::Tokenizer> tok;
  // cfg.task as the policy reads it: chat-form items rendered by tok's template (job/chat_prompts.h).
  std::shared_ptr<const tasks::Task> task;
  std::unique_ptr<model::Model> policy;
  std::unique_ptr<model::Model> reference;  // frozen KL reference (kl_coef > 0), from RL start
  std::unique_ptr<store::ObjectStore> store;
  std::unique_ptr<train::PolicyTrainer> trainer;
  std::unique_ptr<RunMetrics> metrics;  // rank 0 only: metrics.jsonl (+ TensorBoard, Prometheus series)
  std::unique_ptr<metrics::MetricsServer> metrics_endpoint;  // rank 0, [metrics] prometheus_port >= 0
  std::string role;  // "train" (sync) or "trainer" (async): the metrics endpoint's role label
  // Expert parallelism: the EP group the MoE blocks use and the data-parallel group of the
  // dense replicas. Null on one rank.
  std::shared_ptr<ep::Group> ep_group;
  std::shared_ptr<train::DataParallel> dp;
  int rank = 0, world = 1;
  train::TrainerState state;
  bool resumed = false;

 private:
  void resume();
  void load_reference(const std::string& prefix);
  std::unique_ptr<model::Model> policy_copy() const;

  std::string commit_prefix_;       // newest commit made or resumed by this process
  int64_t commit_opt_steps_ = -1;   // the optimizer's step count at that commit
};

}  // namespace moerl::job
