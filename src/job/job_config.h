// The job config of `moerl train`, `moerl trainer` and `moerl rollout`: every section of the
// TOML file, read and validated in one place. Sections owned by other parts are read by their own readers (rl::read_loss_config
// for [algorithm], tasks::make_task for [task], read_metrics_section for [metrics]); this file
// owns [model], [rollout], [train], [runtime], [store], [ep] and rejects unknown keys in all of them.
//
//   JobConfig job = JobConfig::load("examples/demo.toml", {"train.steps=10"});
//   job.train.steps, job.rollout.prompts_per_step, job.loss.eps_high, ...
//   std::shared_ptr<const tasks::Task> t = job.task;  // built from [task]
// Errors: moerl::Error naming the key (e.g. "config: train.steps = -1 is outside [0, ...]").
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/dtype.h"
#include "io/hf_config.h"
#include "job/chat_prompts.h"
#include "job/metrics_config.h"
#include "model/model.h"
#include "rl/loss_config.h"
#include "rollout/group_rollout.h"
#include "runtime/runtime_config.h"
#include "tasks/reward_fn.h"
#include "tasks/task.h"
#include "train/policy_trainer.h"

namespace moerl::job {

struct ModelSection {
  std::string init = "random";  // "random" or a directory with config.json + safetensors
  io::HfConfig arch;            // for init = "random" (vocab size comes from the tokenizer)
  uint64_t seed = 0;
  std::string device = "cpu";           // "cpu", "cuda" or "cuda:N"; the same for every role
  DType dtype = DType::kFloat32;        // trainer's parameters: float32 | bfloat16 (base/dtype.h spellings)
  DType rollout_dtype = DType::kFloat32;  // rollout workers' copy; default: dtype (bf16 rollout of
                                          // an fp32 trainer is the usual GPU setup)
  // Options for the trainer's policy (rollout = false) or a rollout worker's copy. Throws
  // moerl::Error naming model.device when it names a GPU this process cannot use.
  model::ModelOptions options(bool rollout) const;
};

struct RolloutSection {
  int64_t prompts_per_step = 16;  // prompt groups per training step
  rollout::RolloutConfig gen;
  int64_t num_workers = 2;        // async mode: rollout workers started by `moerl train`
  // Dynamic sampling (DAPO): prompt groups whose rewards are all equal carry no advantage and
  // are not trained; more prompts are generated until a step has prompts_per_step groups with
  // a reward spread, at most max_sampling_rounds x prompts_per_step prompts per step.
  bool dynamic_sampling = false;
  int64_t max_sampling_rounds = 4;
  // Ranks of one rollout instance of the async job (`moerl launch -n ep_size -- moerl
  // rollout`): the experts sharded over them, generating in lockstep, one worker toward the
  // queue (rollout/instance.h). 1: a worker is one process.
  int64_t ep_size = 1;
};

struct TrainSection {
  int64_t steps = 100;            // RL steps
  int64_t sft_steps = 0;          // supervised warm-start steps before RL
  int64_t sft_batch_size = 64;
  double sft_lr = 3e-3;
  int64_t eval_prompts = 200;
  int64_t eval_every = 0;         // 0: only after SFT and at the end
  // RL steps between checkpoints; 0: only at the end. In async mode the default is
  // kAsyncCheckpointEvery: the experience stream is trimmed behind committed checkpoints, so
  // a run that never commits one grows its queue service's memory without bound.
  int64_t checkpoint_every = 0;
  static constexpr int64_t kAsyncCheckpointEvery = 10;
  int64_t keep_checkpoints = 2;
  uint64_t seed = 0;
  int64_t threads = 0;            // intra-op threads; 0 = leave libtorch's default
  train::TrainerConfig trainer;
};

// The [train] table alone (what JobConfig::parse reads there), for tools that build a trainer
// without a job, e.g. `moerl bench train --set train.KEY=VALUE`. Calls t.done(): an unknown
// key is an Error naming it and listing the accepted ones.
TrainSection read_train_section(ConfigTable t, int64_t max_new_tokens, bool async);

struct JobConfig {
  ModelSection model;
  RolloutSection rollout;
  TrainSection train;
  runtime::RuntimeConfig runtime;  // [runtime], read by runtime::RuntimeConfig::from_config
  rl::LossConfig loss;  // [algorithm]
  std::string store_uri;  // [store] uri; "" = <run dir>/store
  int64_t ep_size = 1;  // [ep] size: the trainer's ranks (sync: every rank of the job)
  std::string ep_backend = "loopback";
  // backend = "hierarchical": the intra-node hop ("" = auto: cuda_ipc in GPU builds, else
  // fabric over shm) and the inter-node hop (docs/ep-hierarchical.md).
  std::string ep_intra_backend;
  std::string ep_inter_backend = "fabric";
  // Every collective wait of a trainer group or rollout instance: must cover the longest local
  // work between two collectives (loading weights, scoring rewards); a dead peer fails at once.
  double ep_timeout_seconds = 300;
  MetricsSection metrics;  // [metrics]: Prometheus endpoint, TensorBoard (job/metrics_config.h)
  std::shared_ptr<const tasks::Task> task;
  std::shared_ptr<tasks::RewardFn> reward;
  ChatSection chat;  // [task] chat_template, system_prompt, enable_thinking (job/chat_prompts.h)
  std::string effective_toml;  // the config with overrides applied (written to the run dir)

  static JobConfig load(const std::string& path, const std::vector<std::string>& overrides);
  static JobConfig parse(ConfigDoc doc);
};

}  // namespace moerl::job
