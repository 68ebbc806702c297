// Trainer pieces: schedule, AdamW against a hand-computed step, batch packing and the
// logprob shift, and that RL / SFT steps move the policy the right way.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "model/model.h"
#include "model/test_util.h"
#include "train/adamw.h"
#include "train/packed_batch.h"
#include "train/policy_trainer.h"
#include "train/schedule.h"

namespace moerl::train {
namespace {

io::HfConfig tiny_config() {
  io::HfConfig c;
  c.model_type = "qwen3_moe";
  c.vocab_size = 20;
  c.hidden_size = 16;
  c.intermediate_size = 32;
  c.moe_intermediate_size = 16;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 8;
  c.num_experts = 4;
  c.num_experts_per_tok = 2;
  c.max_position_embeddings = 64;
  return c;
}

TEST(Schedule, WarmupThenCosine) {
  LrSchedule s{.lr = 1.0, .warmup_steps = 4, .total_steps = 14, .min_lr_ratio = 0.1};
  EXPECT_DOUBLE_EQ(s.at(0), 0.25);
  EXPECT_DOUBLE_EQ(s.at(3), 1.0);
  EXPECT_DOUBLE_EQ(s.at(4), 1.0);
  EXPECT_NEAR(s.at(9), 0.1 + 0.9 * 0.5, 1e-12);  // halfway through the decay
  EXPECT_NEAR(s.at(14), 0.1, 1e-12);
  EXPECT_NEAR(s.at(100), 0.1, 1e-12);
}

TEST(AdamW, FirstStepMatchesHandComputation) {
  at::Tensor p = at::tensor({1.0f, -2.0f}).set_requires_grad(true);
  AdamW opt({{"p", p}}, {.lr = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.5});
  p.mutable_grad() = at::tensor({0.5f, -4.0f});
  opt.step(0.1);
  // Step 1: m_hat = g, v_hat = g^2 -> update = g/|g| = sign(g); decay p *= (1 - 0.1*0.5).
  EXPECT_NEAR(p[0].item<float>(), 1.0 * 0.95 - 0.1, 1e-6);
  EXPECT_NEAR(p[1].item<float>(), -2.0 * 0.95 + 0.1, 1e-6);
  auto st = opt.state();
  EXPECT_EQ(st.at("step").item<int64_t>(), 1);
  EXPECT_NEAR(st.at("exp_avg.p")[1].item<float>(), 0.1 * -4.0, 1e-6);
}

TEST(AdamW, ClipGradNormScalesToMax) {
  at::Tensor a = at::zeros({2}).set_requires_grad(true), b = at::zeros({1}).set_requires_grad(true);
  AdamW opt({{"a", a}, {"b", b}}, {});
  a.mutable_grad() = at::tensor({3.0f, 0.0f});
  b.mutable_grad() = at::tensor({4.0f});
  EXPECT_NEAR(opt.clip_grad_norm(1.0), 5.0, 1e-9);
  EXPECT_NEAR(a.grad()[0].item<float>(), 0.6, 1e-5);
  EXPECT_NEAR(b.grad()[0].item<float>(), 0.8, 1e-5);
}

TEST(PackedBatch, LayoutAndShift) {
  runtime::Sample s1{.prompt_tokens = {1, 5}, .response_tokens = {7, 2}, .behaviour_logprobs = {-0.5f, -0.25f}, .reward = 1};
  runtime::Sample s2{.prompt_tokens = {1}, .response_tokens = {9}, .behaviour_logprobs = {-1.0f}, .reward = 0};
  PackedBatch b = pack_samples({&s1, &s2}, 0);
  ASSERT_EQ(b.max_len, 4);
  EXPECT_TRUE(at::equal(b.input_ids_BT, at::tensor({1, 5, 7, 2, 1, 9, 0, 0}, at::kLong).view({2, 4})));
  EXPECT_TRUE(at::equal(b.response_mask_BT, at::tensor({0.f, 0.f, 1.f, 1.f, 0.f, 1.f, 0.f, 0.f}).view({2, 4})));
  EXPECT_FLOAT_EQ(b.behav_logp_BT[0][3].item<float>(), -0.25f);
  // token_logprobs: position t scores ids[t] with the logits at t-1.
  at::Tensor logits = at::randn({2, 4, 10});
  at::Tensor lp = token_logprobs(logits, b.input_ids_BT);
  EXPECT_FLOAT_EQ(lp[0][0].item<float>(), 0.f);
  EXPECT_NEAR(lp[0][2].item<float>(), logits[0][1].log_softmax(-1)[7].item<float>(), 1e-6);
  runtime::Sample bad{.prompt_tokens = {1}, .response_tokens = {3, 4}, .behaviour_logprobs = {-1.f}};
  EXPECT_THROW(pack_samples({&bad}, 0), Error);
}

// The mean logprob of `response` after `prompt` under the model.
double response_logprob(model::Model& m, const runtime::Sample& s) {
  at::NoGradGuard g;
  PackedBatch b = pack_samples({&s}, 0);
  auto out = m.forward({.input_ids = b.input_ids_BT, .attention_mask = b.attention_mask_BT});
  return (token_logprobs(out.logits_BTV, b.input_ids_BT) * b.response_mask_BT).sum().item<double>();
}

runtime::ExperienceRecord group_of_two() {
  // Two responses to one prompt; the first is rewarded. Fresh samples (no correction).
  runtime::ExperienceRecord r;
  r.task_id = "t0";
  for (int k = 0; k < 2; ++k) {
    runtime::Sample s{.prompt_tokens = {1, 4, 5}, .response_tokens = {static_cast<int32_t>(6 + 3 * k), 2}};
    s.behaviour_logprobs.assign(2, 0.f);
    s.reward = k == 0 ? 1.f : 0.f;
    r.samples.push_back(s);
  }
  return r;
}

void expect_prefers_rewarded(rl::LossConfig loss) {
  model::Model m = model::init_random(tiny_config(), 3);
  TrainerConfig cfg;
  cfg.adamw.lr = 1e-2;
  cfg.schedule = {.lr = 1e-2, .kind = LrSchedule::Kind::kConstant};
  cfg.loss = loss;
  cfg.loss.group_size = 2;
  PolicyTrainer t(m, nullptr, cfg, 0);
  runtime::ExperienceRecord r = group_of_two();
  double good0 = response_logprob(m, r.samples[0]), bad0 = response_logprob(m, r.samples[1]);
  StepStats st;
  for (int i = 0; i < 10; ++i) st = t.train_step({r});
  double good1 = response_logprob(m, r.samples[0]), bad1 = response_logprob(m, r.samples[1]);
  EXPECT_GT(good1, good0 + 0.1) << "rewarded response should become likelier";
  EXPECT_LT(bad1, bad0 - 0.1) << "unrewarded response should become less likely";
  EXPECT_EQ(st.num_samples, 2);
  EXPECT_EQ(st.num_tokens, 4);
  EXPECT_GT(st.grad_norm, 0);
  EXPECT_EQ(t.step(), 10);
}

TEST(PolicyTrainer, GrpoStepFavoursRewardedResponse) { expect_prefers_rewarded(rl::LossConfig{}); }

// deepseek_v3 trains (MLA, sigmoid group routing, shared expert) while its selection bias, a
// buffer, stays out of the optimizer and unchanged.
TEST(PolicyTrainer, DeepseekV3StepLeavesTheSelectionBiasAlone) {
  io::HfConfig cfg = model::testing::tiny_deepseek();
  cfg.vocab_size = 20;
  model::Model m = model::init_random(cfg, 3);
  const std::string bias = "model.layers.1.mlp.gate.e_score_correction_bias";
  {
    at::NoGradGuard g;
    m.buffers().at(bias).copy_(at::randn({cfg.num_experts}) * 0.01);
  }
  const at::Tensor before = m.buffers().at(bias).clone();
  TrainerConfig tc;
  tc.adamw.lr = 1e-2;
  tc.adamw.weight_decay = 0.1;
  tc.schedule = {.lr = 1e-2, .kind = LrSchedule::Kind::kConstant};
  tc.loss.group_size = 2;
  PolicyTrainer t(m, nullptr, tc, 0);
  runtime::ExperienceRecord r = group_of_two();
  const double good0 = response_logprob(m, r.samples[0]);
  for (int i = 0; i < 5; ++i) t.train_step({r});
  EXPECT_GT(response_logprob(m, r.samples[0]), good0 + 0.1);
  EXPECT_TRUE(at::equal(m.buffers().at(bias), before));
  for (const auto& [name, _] : t.optimizer().state()) EXPECT_EQ(name.find("e_score_correction_bias"), std::string::npos) << name;
}

TEST(PolicyTrainer, PpoWithCriticFavoursRewardedResponse) {
  rl::LossConfig c;
  c.algorithm = rl::Algorithm::kPpo;
  c.adv_estimator = rl::AdvEstimator::kGae;
  c.whiten_advantages = true;
  expect_prefers_rewarded(c);
}

// With one optimizer step per batch the trainer takes pi_old from the gradient pass (no
// separate no-grad forward): that pass must give the same logprobs bit for bit, and the
// behaviour weights of a TIS step must be exp(pi_old - pi_behav) of the policy before it.
TEST(PolicyTrainer, TisStepTakesOldPolicyFromGradientPass) {
  model::Model m = model::init_random(tiny_config(), 4);
  runtime::ExperienceRecord r = group_of_two();
  r.samples[0].behaviour_logprobs = {-0.4f, -2.5f};  // stale: generated by another policy
  r.samples[1].behaviour_logprobs = {-3.0f, -0.1f};
  std::vector<const runtime::Sample*> rows = {&r.samples[0], &r.samples[1]};
  PackedBatch b = pack_samples(rows, 0);
  at::Tensor grad_lp = token_logprobs(m.forward({.input_ids = b.input_ids_BT, .attention_mask = b.attention_mask_BT}).logits_BTV,
                                      b.input_ids_BT).detach();
  at::Tensor lp;
  {
    at::NoGradGuard g;
    lp = token_logprobs(m.forward({.input_ids = b.input_ids_BT, .attention_mask = b.attention_mask_BT}).logits_BTV,
                        b.input_ids_BT);
  }
  EXPECT_TRUE(at::equal(lp, grad_lp)) << "no-grad and gradient forward passes must agree bit for bit";
  TrainerConfig cfg;
  cfg.loss.group_size = 2;
  cfg.loss.behaviour_correction = rl::BehaviourCorrection::kTis;
  cfg.loss.tis_cap = 2.0;
  at::Tensor w = (lp - b.behav_logp_BT).exp();  // the metric is the weight before the cap
  double expected = ((w * b.response_mask_BT).sum() / b.response_mask_BT.sum()).item<double>();
  PolicyTrainer t(m, nullptr, cfg, 0);
  StepStats st = t.train_step({r});
  EXPECT_NEAR(st.behav_weight, expected, 1e-6);
  EXPECT_EQ(st.clip_frac, 0.0);    // pi_theta = pi_old within the step: ratio exactly 1
  EXPECT_NEAR(st.approx_kl, 0.0, 1e-12);
  EXPECT_GT(st.grad_norm, 0);
}

TEST(PolicyTrainer, SftRaisesLikelihoodOfTargets) {
  model::Model m = model::init_random(tiny_config(), 5);
  TrainerConfig cfg;
  PolicyTrainer t(m, nullptr, cfg, 0);
  runtime::Sample s{.prompt_tokens = {1, 7}, .response_tokens = {8, 9, 2}, .behaviour_logprobs = {0, 0, 0}};
  double before = response_logprob(m, s);
  StepStats first = t.sft_step({s}, 1e-2), last;
  for (int i = 0; i < 20; ++i) last = t.sft_step({s}, 1e-2);
  EXPECT_GT(response_logprob(m, s), before + 1.0);
  EXPECT_LT(last.loss, first.loss);
}

}  // namespace
}  // namespace moerl::train
