// Generates prompt groups with the current policy and scores them: the work of a rollout
// worker for one batch of task units, shared by the sync job and the async worker role.
// Every unit's G responses are generated in ONE batched call (all units together), scored
// with the task's RewardFn, and returned as runtime::ExperienceRecords stamped with the
// policy version that produced them.
//
//   GroupRollout r(policy, *tokenizer, *reward_fn, cfg, "worker-0");
//   std::vector<runtime::ExperienceRecord> recs = r.run(units, /*seed=*/step, /*version=*/v);
//
// Behaviour logprobs are those of the distribution sampled from (model::Generation::
// sample_logprobs: after temperature and top-k/top-p truncation), which is what the trainer
// recomputes with the same sampling settings (model::sampling_logits).
// Not thread-safe (borrows one Model). Errors: prompts outside the tokenizer's vocabulary.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "model/model.h"
#include "model/sampler.h"
#include "model/tokenizer.h"
#include "runtime/records.h"
#include "tasks/reward_fn.h"

namespace moerl::rollout {

struct RolloutConfig {
  int64_t max_new_tokens = 16;
  model::SamplingConfig sampling;
  std::function<bool(bool)> all_done;  // EP lockstep (model::GenerateConfig::all_done); null: one rank
  bool record_routing = false;  // routing replay: records carry the experts each token used
  // Stop strings ([rollout] stop): a row ends at the token that completes one; the stop text
  // stays in the response (model/stop_strings.h).
  std::vector<std::string> stop;
  // Continuous batching ([rollout] batch_rows): rows decoded at once, refilled as answers end
  // (model::GenerateConfig::batch_rows). 0: the whole batch at once.
  int64_t batch_rows = 0;
};

class GroupRollout {
 public:
  GroupRollout(model::Model& policy, const model::Tokenizer& tokenizer, tasks::RewardFn& reward,
               RolloutConfig cfg, std::string worker_id);

  // `cancel` (may be empty) is model::GenerateConfig::cancel: true abandons the batch
  // (model::GenerationCancelled).
  std::vector<runtime::ExperienceRecord> run(const std::vector<runtime::TaskUnit>& units,
                                             uint64_t seed, uint64_t version, std::function<bool()> cancel = {});
  const RolloutConfig& config() const { return cfg_; }

 private:
  model::Model& policy_;
  const model::Tokenizer& tokenizer_;
  tasks::RewardFn& reward_;
  RolloutConfig cfg_;
  std::string worker_id_;
};

// The task unit for dataset item `item` (prompt encoded with BOS).
runtime::TaskUnit make_task_unit(const tasks::TaskItem& item, const model::Tokenizer& tok,
                                 uint32_t group_size, uint64_t cursor);

// Completion text of generated tokens: stops at the first of tok.stop_ids(), special tokens
// dropped.
std::string completion_text(const model::Tokenizer& tok, const std::vector<int64_t>& tokens);

}  // namespace moerl::rollout
