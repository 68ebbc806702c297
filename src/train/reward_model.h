// The reward-model hook: reward computed by a scoring model instead of a rule. A scoring
// model is any moerl model directory (config.json, model.safetensors, moerl_tokenizer.json)
// that also holds value_head.safetensors (value_head.weight [1,H], value_head.bias [1]), as
// the final_model of a PPO run does. score(text) = value head on the final hidden state of
// the text's last token.
//
//   [task]
//   name = "addition"
//   reward = "model"                 # instead of the task's verifier
//   reward_model = "runs/rm/final_model"
//   reward_squash = "sigmoid"        # or "none" (raw values)
//
//   register_model_reward();         // once, before tasks::make_reward_fn (JobConfig does it)
// Not thread-safe (one model forward at a time). Errors: a directory without a value head.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "model/tokenizer.h"

namespace moerl::train {

class ValueScorer {
 public:
  explicit ValueScorer(const std::string& model_dir);
  std::vector<double> score(const std::vector<std::string>& texts);

 private:
  std::shared_ptr<model::Model> model_;
  std::shared_ptr<model::Tokenizer> tok_;
  at::Tensor w_1H_, b_1;
};

inline constexpr const char* kValueHeadFile = "value_head.safetensors";

// Registers RewardFn kind "model" (idempotent).
void register_model_reward();

}  // namespace moerl::train
