// How a PolicyTrainer turns a batch into optimizer updates: PPO mini-batches (several updates
// per RL step, so ratios move and clip-higher acts), non-finite gradient norms (skipped and
// counted, then a clear stop), and the KL reference a kl_coef > 0 step needs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "base/error.h"
#include "model/model.h"
#include "model/test_util.h"
#include "train/policy_trainer.h"

namespace moerl::train {
namespace {

// Two prompt groups of two responses, one rewarded in each.
std::vector<runtime::ExperienceRecord> two_groups() {
  std::vector<runtime::ExperienceRecord> out;
  for (int g = 0; g < 2; ++g) {
    runtime::ExperienceRecord r;
    r.task_id = "t" + std::to_string(g);
    for (int k = 0; k < 2; ++k) {
      runtime::Sample s{.prompt_tokens = {1, static_cast<int32_t>(4 + g), 5},
                        .response_tokens = {static_cast<int32_t>(6 + 3 * k), static_cast<int32_t>(7 + g), 2}};
      s.behaviour_logprobs.assign(3, 0.f);
      s.reward = k == 0 ? 1.f : 0.f;
      r.samples.push_back(s);
    }
    out.push_back(r);
  }
  return out;
}

TrainerConfig config(double lr) {
  TrainerConfig c;
  c.adamw.lr = lr;
  c.schedule = {.lr = lr, .kind = LrSchedule::Kind::kConstant};
  c.loss.group_size = 2;
  c.loss.aux_loss_coef = 0;
  c.loss.z_loss_coef = 0;
  return c;
}

std::map<std::string, at::Tensor> snapshot(const model::Model& m) {
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, p] : m.params()) out[name] = p.detach().clone();
  return out;
}

bool same_params(const model::Model& m, const std::map<std::string, at::Tensor>& ref) {
  for (const auto& [name, p] : m.params()) {
    if (!at::equal(p, ref.at(name))) return false;
  }
  return true;
}

TEST(PolicyTrainer, MiniBatchesGiveSeveralUpdatesSoClippingActs) {
  TrainerConfig c = config(5e-2);
  c.ppo_mini_batch_size = 2;  // 4 rows: two updates per epoch
  c.ppo_epochs = 2;
  model::Model m = model::init_random(model::testing::tiny_qwen3(), 3);
  PolicyTrainer t(m, nullptr, c, 0);
  StepStats st = t.train_step(two_groups());
  EXPECT_EQ(st.optimizer_steps, 4);
  EXPECT_GT(st.approx_kl, 0) << "later updates must see pi_theta != pi_old";
  EXPECT_GT(st.clip_frac, 0) << "at this learning rate some ratios leave the clip range";
  EXPECT_EQ(t.step(), 1);

  // The upper clip (clip-higher's knob) changes the result once ratios move; with one
  // update per batch it cannot.
  auto train_with = [&](double eps_high) {
    TrainerConfig ch = c;
    ch.loss.eps_high = eps_high;
    model::Model mm = model::init_random(model::testing::tiny_qwen3(), 3);
    PolicyTrainer tt(mm, nullptr, ch, 0);
    tt.train_step(two_groups());
    return snapshot(mm);
  };
  auto a = train_with(0.2), b = train_with(5.0);
  bool differ = false;
  for (const auto& [name, p] : a) differ = differ || !at::equal(p, b.at(name));
  EXPECT_TRUE(differ) << "eps_high had no effect";
}

TEST(PolicyTrainer, NonFiniteGradientNormSkipsTheUpdateAndStopsAfterTheLimit) {
  TrainerConfig c = config(1e-2);
  c.max_nonfinite_steps = 3;
  model::Model m = model::init_random(model::testing::tiny_qwen3(), 4);
  PolicyTrainer t(m, nullptr, c, 0);
  auto bad = two_groups();
  bad[0].samples[0].reward = std::numeric_limits<float>::quiet_NaN();  // NaN advantages
  const auto before = snapshot(m);
  const auto moments = t.optimizer().state();
  StepStats st = t.train_step(bad);
  EXPECT_EQ(st.skipped_nonfinite, 1);
  EXPECT_EQ(st.optimizer_steps, 0);
  EXPECT_TRUE(same_params(m, before)) << "a NaN gradient reached the weights";
  EXPECT_TRUE(at::equal(t.optimizer().state().at("step"), moments.at("step")));
  // A good step in between resets the count.
  t.train_step(bad);
  StepStats good = t.train_step(two_groups());
  EXPECT_EQ(good.optimizer_steps, 1);
  EXPECT_TRUE(std::isfinite(good.grad_norm));
  t.train_step(bad);
  t.train_step(bad);
  try {
    t.train_step(bad);
    ADD_FAILURE() << "three non-finite updates in a row did not stop the run";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("3 optimizer updates in a row"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("max_nonfinite_steps"), std::string::npos) << e.what();
  }
}

TEST(PolicyTrainer, KlNeedsAReferenceByTheFirstStep) {
  TrainerConfig c = config(1e-2);
  c.loss.kl_coef = 0.1;
  model::Model m = model::init_random(model::testing::tiny_qwen3(), 5);
  model::Model ref = model::init_random(model::testing::tiny_qwen3(), 5);
  PolicyTrainer t(m, nullptr, c, 0);  // constructing without one is fine (the job sets it later)
  EXPECT_THROW(t.train_step(two_groups()), Error);
  t.set_reference(&ref);
  StepStats first = t.train_step(two_groups());
  EXPECT_NEAR(first.kl, 0.0, 1e-7);  // policy = reference
  StepStats second = t.train_step(two_groups());
  EXPECT_GT(second.kl, 0.0);
}

}  // namespace
}  // namespace moerl::train
