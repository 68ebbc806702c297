// Held-out evaluation: greedy completions of a fixed slice of the task's held-out split,
// scored by the task's RewardFn. The same items for every call (indices 0..n-1), so the
// numbers of the SFT checkpoint and the final one are comparable.
//
//   EvalResult e = evaluate(policy, *tok, *task, *reward_fn, {.num_prompts = 200, .max_new_tokens = 8});
//   e.mean_reward, e.exact_fraction (reward == 1)
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/model.h"
#include "model/tokenizer.h"
#include "tasks/reward_fn.h"
#include "tasks/task.h"

namespace moerl::rollout {

struct EvalConfig {
  int64_t num_prompts = 200;
  int64_t max_new_tokens = 16;
  int64_t batch_size = 256;
  // Expert-parallel ranks: this rank scores items shard, shard + num_shards, ... (the caller
  // sums the results over ranks); all_done keeps generation in lockstep (model/generate.h).
  int64_t shard = 0;
  int64_t num_shards = 1;
  std::function<bool(bool)> all_done;
  std::vector<std::string> stop;  // stop strings (RolloutConfig::stop)
};

struct EvalResult {
  double mean_reward = 0;
  double exact_fraction = 0;  // share of prompts with reward >= 1
  int64_t num_prompts = 0;  // scored here (this shard)
  double seconds = 0;
};

EvalResult evaluate(model::Model& policy, const model::Tokenizer& tok, const tasks::Task& task,
                    tasks::RewardFn& reward, const EvalConfig& cfg);

}  // namespace moerl::rollout
