// TrainerConfig::logprob_chunk > 0 scores tokens from the hidden states a chunk at a time
// (no [B,T,V] logits): RL steps (with temperature and top-k, entropy in the loss, a KL
// reference, PPO epochs) and SFT steps move the weights as the full-logits path does.
#include <gtest/gtest.h>

#include "model/model.h"
#include "model/test_util.h"
#include "train/policy_trainer.h"

namespace moerl::train {
namespace {

runtime::ExperienceRecord group(int seed) {
  runtime::ExperienceRecord r;
  r.task_id = "t" + std::to_string(seed);
  for (int k = 0; k < 3; ++k) {
    runtime::Sample s{.prompt_tokens = {1, 4 + seed, 5}, .response_tokens = {6 + k, 9 + 2 * k, 11, 2}};
    s.behaviour_logprobs = {-1.5f, -0.7f - 0.1f * k, -2.0f, -0.3f};
    s.reward = static_cast<float>(k == seed % 3);
    r.samples.push_back(s);
  }
  return r;
}

// The weights after `steps` RL steps and one SFT step with logprob_chunk = `chunk`.
model::Params train(int64_t chunk) {
  io::HfConfig cfg = model::testing::tiny_qwen3();
  cfg.vocab_size = 20;
  model::Model m = model::init_random(cfg, 7);
  model::Model ref = model::init_random(cfg, 7);
  TrainerConfig tc;
  tc.adamw.lr = 1e-2;
  tc.adamw.eps = 1e-4;  // AdamW's 1e-8 would blow float32 noise in near-zero gradients up to lr
  tc.schedule = {.lr = 1e-2, .kind = LrSchedule::Kind::kConstant};
  tc.loss.group_size = 3;
  tc.loss.entropy_coef = 0.01;
  tc.loss.kl_coef = 0.05;
  tc.ppo_epochs = 2;
  tc.micro_batch_size = 2;
  tc.sampling.temperature = 0.8;
  tc.sampling.top_k = 12;
  tc.logprob_chunk = chunk;
  PolicyTrainer t(m, &ref, tc, 0);
  for (int i = 0; i < 3; ++i) t.train_step({group(i), group(i + 1)});
  runtime::Sample sft{.prompt_tokens = {1, 7}, .response_tokens = {8, 9, 2}, .behaviour_logprobs = {0, 0, 0}};
  t.sft_step({sft}, 1e-2);
  model::Params out;
  for (const auto& [name, p] : m.params()) out[name] = p.detach().clone();
  return out;
}

TEST(ChunkedTrainer, StepsMoveTheWeightsAsTheFullLogitsPathDoes) {
  const model::Params full = train(0);
  for (int64_t chunk : {int64_t{1}, int64_t{5}, int64_t{4096}}) {
    const model::Params chunked = train(chunk);
    double worst = 0;
    for (const auto& [name, p] : full) {
      const at::Tensor d = (chunked.at(name) - p).abs().max();
      worst = std::max(worst, d.item<double>());
    }
    // float32 rounding apart over 3 RL steps x 2 epochs and one SFT step (lr 1e-2).
    EXPECT_LT(worst, 1e-5) << "chunk " << chunk;
  }
}

}  // namespace
}  // namespace moerl::train
