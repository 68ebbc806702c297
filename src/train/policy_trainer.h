// One optimisation step of the RL objective on a batch of experience: packs the samples,
// computes advantages (group-relative, or GAE with a value head on the policy trunk),
// recomputes old/reference logprobs where the objective needs them, then runs micro-batches
// with losses normalised over the global batch, clips and applies AdamW. Also the
// supervised (SFT) step used for warm starts.
//
//   PolicyTrainer t(policy, /*reference=*/nullptr, cfg, pad_id);
//   StepStats s = t.train_step(records);    // records: one prompt group each
//   StepStats w = t.sft_step(samples);      // response = reference answer
// Not thread-safe; owns the optimizer and value head, borrows the models.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "model/sampler.h"
#include "rl/aggregation.h"
#include "rl/loss_config.h"
#include "runtime/records.h"
#include "train/adamw.h"
#include "train/micro_batches.h"
#include "train/packed_batch.h"
#include "train/schedule.h"

namespace moerl::train {

struct TrainerConfig {
  AdamWConfig adamw;
  LrSchedule schedule;
  double max_grad_norm = 1.0;
  int64_t micro_batch_size = 64;  // rows per forward/backward
  int64_t ppo_epochs = 1;         // passes over each batch of experience
  // Rows (samples) per optimizer step; 0 = the whole batch (one step per epoch). Smaller
  // mini-batches give several optimizer steps per RL step, so ratios move and clipping acts.
  int64_t ppo_mini_batch_size = 0;
  // Optimizer steps in a row skipped for a non-finite gradient norm before the run stops.
  int64_t max_nonfinite_steps = 5;
  int64_t max_new_tokens = 16;    // L_max of seq-mean-token-sum-norm and the overlong penalty
  // The rollout's sampling settings: RL logprobs and entropy are those of the distribution
  // sampled from (model::sampling_logits), so pi_old equals the behaviour logprob.
  model::SamplingConfig sampling;
  rl::LossConfig loss;
  // Positions per chunk when scoring tokens from the hidden states (train/chunked_logprobs.h):
  // no [B,T,V] logits are made, which at a real vocabulary is the memory of the step. 0: the
  // model's full logits (the reference path).
  int64_t logprob_chunk = 0;
  // kPerLayer: each decoder layer keeps only its input during the gradient passes and is
  // recomputed in the backward (model/checkpointed_layer.h): activation memory of one layer
  // instead of all, for one more forward. Gradients equal kNone's.
  model::LayerCheckpointing activation_checkpointing = model::LayerCheckpointing::kNone;
  // Padded tokens (rows x longest row) per micro-batch; rows are sorted by length and packed
  // greedily (train/micro_batches.h), and micro_batch_size is not used. 0: micro_batch_size rows.
  int64_t max_tokens_per_micro_batch = 0;
};

// One RL (or SFT) step. Losses are the mean over the step's optimizer updates; token
// statistics are token-weighted means over all of its updates.
struct StepStats {
  double loss = 0, pg_loss = 0, value_loss = 0, kl = 0, entropy = 0, aux_loss = 0;
  double clip_frac = 0, approx_kl = 0, behav_weight = 0, grad_norm = 0, lr = 0;
  double behav_capped_frac = 0;
  double mismatch_abs = 0, mismatch_kl = 0;  // rollout vs trainer: mean |logp_behav - logp_old|, k3 KL
  double reward_mean = 0, reward_std = 0, response_len = 0;
  int64_t num_samples = 0, num_tokens = 0;  // response tokens trained on
  int64_t optimizer_steps = 0;              // updates applied
  int64_t skipped_nonfinite = 0;            // updates skipped: non-finite gradient norm
  double seconds = 0;
};

class DataParallel;  // train/dp_sync.h

class PolicyTrainer {
 public:
  PolicyTrainer(model::Model& policy, model::Model* reference, TrainerConfig cfg, int64_t pad_id);

  // The frozen KL reference (kl_coef > 0 needs one by the first train_step); borrowed.
  void set_reference(model::Model* reference) { reference_ = reference; }
  bool has_reference() const { return reference_ != nullptr; }

  StepStats train_step(const std::vector<runtime::ExperienceRecord>& records);
  StepStats sft_step(const std::vector<runtime::Sample>& samples, double lr);

  int64_t step() const { return step_; }
  void set_step(int64_t step) { step_ = step; }
  const TrainerConfig& config() const { return cfg_; }
  AdamW& optimizer() { return *opt_; }
  // Value head (PPO critic on the policy trunk): "value_head.weight" [1,H], "value_head.bias" [1].
  std::map<std::string, at::Tensor> value_head() const;
  void load_value_head(const std::map<std::string, at::Tensor>& tensors);
  // Expert-parallel data parallelism: gradients are averaged over the ranks (and clipped by
  // the global norm) before every optimizer step. Null (the default): one rank.
  void set_data_parallel(std::shared_ptr<DataParallel> dp) { dp_ = std::move(dp); }

 private:
  double clip_gradients();
  // One optimizer update on rows [begin, end) of the step's batch; adds to `st`.
  struct StepInputs;
  void update(const StepInputs& in, int64_t begin, int64_t end, StepStats& st);
  // Skips a non-finite update (counted; throws after max_nonfinite_steps in a row).
  bool apply_update(double grad_norm, double lr, StepStats& st);
  // A mini-batch's loss normaliser and routed (attention) token count, global under EP.
  struct BatchCounts {
    rl::LossNorm norm;
    double routed_tokens = 1;
  };
  BatchCounts global_counts(const PackedBatch& b) const;
  // The micro-batches of rows [begin, end) of `b`; under expert parallelism with a token
  // budget, padded with fillers to the most any rank has (every forward is collective).
  MicroBatchPlan plan(const PackedBatch& b, const std::vector<int64_t>& lengths, int64_t begin, int64_t end);
  // A filler micro-batch: a forward of one pad token through `m` and, when `backward`, the
  // backward of a zero loss, so that a rank's EP collectives pair with its peers'.
  void filler_pass(model::Model& m, bool backward);
  at::Tensor advantages(const PackedBatch& b, const at::Tensor& old_values_BT,
                        const at::Tensor& ref_logp_BT, const at::Tensor& old_logp_BT, int64_t group_size);

  model::Model& policy_;
  model::Model* reference_;
  TrainerConfig cfg_;
  int64_t pad_id_;
  at::Tensor value_w_1H_, value_b_1;
  at::Tensor returns_BT_;  // GAE returns of the batch in flight (critic only)
  std::unique_ptr<AdamW> opt_;
  std::map<std::string, at::Tensor> trained_;  // what opt_ updates (policy + critic head)
  std::shared_ptr<DataParallel> dp_;
  int64_t step_ = 0;
  int64_t nonfinite_in_a_row_ = 0;
  bool warned_over_budget_ = false;  // a row longer than max_tokens_per_micro_batch was reported
};

}  // namespace moerl::train
