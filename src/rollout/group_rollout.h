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
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/generate.h"
#include "model/model.h"
#include "model/sampler.h"
#include "model/stop_strings.h"
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
  // Streaming async workers ([rollout] streaming; rollout/worker.h): batch_rows rows decode
  // without a tail, fed from the task queue as they free up. Needs batch_rows; one-rank
  // workers only (an EP instance generates each batch whole).
  bool streaming = false;
  // Padded prompt tokens per prefill forward ([rollout] prefill_tokens;
  // model::GenerateConfig::prefill_tokens). 0: every prompt of a call in one forward.
  int64_t prefill_tokens = model::GenerateConfig{}.prefill_tokens;
};

// Where a streaming GroupRollout takes units from and gives records to (rollout/worker_stream.cc:
// leases from the task queue, puts into the experience buffer), on the generating thread.
class UnitSource {
 public:
  virtual ~UnitSource() = default;
  // Up to `max_units` units to start; empty: none now. `idle`: nothing is generating, so it
  // may wait a while for work; otherwise it should answer at once.
  virtual std::vector<runtime::TaskUnit> take(int64_t max_units, bool idle) = 0;
  // A unit's record (task_id and attempt as taken, cursor set from it).
  virtual void done(runtime::ExperienceRecord record) = 0;
  // Between decode steps: activates a newer policy version in the model if one is ready
  // (Model::load_weights, in place) and returns its number; nullopt: unchanged.
  virtual std::optional<uint64_t> refresh() = 0;
  // The version the model holds now.
  virtual uint64_t version() const = 0;
};

class GroupRollout {
 public:
  GroupRollout(model::Model& policy, const model::Tokenizer& tokenizer, tasks::RewardFn& reward,
               RolloutConfig cfg, std::string worker_id);

  // `cancel` (may be empty) is model::GenerateConfig::cancel: true abandons the batch
  // (model::GenerationCancelled).
  std::vector<runtime::ExperienceRecord> run(const std::vector<runtime::TaskUnit>& units,
                                             uint64_t seed, uint64_t version, std::function<bool()> cancel = {});
  // Streaming: generates units taken from `source` (the first waits for work; later ones are
  // taken as rows free up: [rollout] batch_rows of them decode at once) until the source gives
  // none and no row runs; each unit's record goes to source.done() as its last sample ends,
  // with the versions that produced each token (the source may swap weights between decode
  // steps). False: the source had no work. `cancel` as in run(); when it throws, the units
  // taken and not done are the caller's to hand back. Defined in group_stream.cc.
  bool stream(UnitSource& source, uint64_t seed, std::function<bool()> cancel = {});
  const RolloutConfig& config() const { return cfg_; }

 private:
  friend class GroupStreamState;
  std::vector<int64_t> prompt_of(const runtime::TaskUnit& u) const;  // its ids, else its text encoded
  model::GenerateConfig generate_config(uint64_t seed, uint64_t version, std::function<bool()> cancel) const;
  // Rewards of the units' samples (gens: every unit's group_size generations, in order).
  std::vector<double> score(std::span<const runtime::TaskUnit> units, std::span<const model::Generation> gens);
  // A unit's record from its group_size generations (routing moved out) and rewards.
  runtime::ExperienceRecord record(const runtime::TaskUnit& u, const std::vector<int64_t>& prompt,
                                   std::span<model::Generation> gens, const double* rewards, double gen_s,
                                   double reward_s) const;

  model::Model& policy_;
  const model::Tokenizer& tokenizer_;
  tasks::RewardFn& reward_;
  RolloutConfig cfg_;
  std::string worker_id_;
  model::StopStrings stops_{tokenizer_, cfg_.stop};  // after tokenizer_ and cfg_
  int64_t room_ = 0;  // streaming: prompt tokens the next call's rows keep room for
};

// The task unit for dataset item `item` (prompt encoded with BOS).
runtime::TaskUnit make_task_unit(const tasks::TaskItem& item, const model::Tokenizer& tok,
                                 uint32_t group_size, uint64_t cursor);

// Completion text of generated tokens: stops at the first of tok.stop_ids(), special tokens
// dropped.
std::string completion_text(const model::Tokenizer& tok, const std::vector<int64_t>& tokens);

}  // namespace moerl::rollout
