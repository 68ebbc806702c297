// Policy loss against hand-computed values: clip, clip-higher, dual clip, the three
// aggregation modes, TIS, decoupled, KL in the loss, entropy bonus, analytic gradients;
// plus properties on random inputs: micro-batches sum to the full batch (loss and
// gradients) and behaviour correction with fresh samples reduces to plain PPO/GRPO.
#include "rl/policy_loss.h"

#include <cmath>

#include <gtest/gtest.h>

#include "base/error.h"
#include "rl/test_util.h"

namespace moerl::rl {
namespace {

using testing::expect_all_near;
using testing::expect_tensors_near;
using testing::t;

// Six tokens, eps_low = 0.2, eps_high = 0.28, dual clip c = 3 (rho, A -> token loss):
//   t0 rho 1.5, A  1: max(-1.5, -1.28) = -1.28   (clipped high)
//   t1 rho 0.5, A  1: max(-0.5, -0.8)  = -0.5
//   t2 rho 0.5, A -2: max( 1.0,  1.6)  =  1.6    (clipped low)
//   t3 rho 1.2, A -1: max( 1.2,  1.2)  =  1.2
//   t4 rho 5.0, A -1: max( 5.0,  1.28) =  5.0 -> dual clip min(5, 3) = 3
//   t5 rho 1.1, A .5: -0.55
// Sum 3.47; token-mean 0.5783333. Without dual clip: 5.47 / 6 = 0.9116667.
// With eps_high = 0.2, t0 becomes -1.2: 3.55 / 6 = 0.5916667.
const std::vector<double> kRatio = {1.5, 0.5, 0.5, 1.2, 5.0, 1.1};
const std::vector<double> kAdv = {1, 1, -2, -1, -1, 0.5};
const std::vector<double> kOld = {-0.7, -1.9, -0.3, -2.4, -1.1, -0.9};

LossConfig dapo_config() {
  LossConfig c;
  c.eps_low = 0.2;
  c.eps_high = 0.28;
  c.dual_clip = 3.0;
  c.aux_loss_coef = 0;
  c.z_loss_coef = 0;
  return c;
}

// One row of the six tokens; logp requires grad.
PolicyLossInputs six_tokens() {
  PolicyLossInputs in;
  std::vector<double> logp(6);
  for (int i = 0; i < 6; ++i) logp[i] = kOld[i] + std::log(kRatio[i]);
  in.logp_BL = t(logp, {1, 6}).requires_grad_(true);
  in.old_logp_BL = t(kOld, {1, 6});
  in.advantages_BL = t(kAdv, {1, 6});
  in.mask_BL = at::ones({1, 6}, at::kDouble);
  in.norm = LossNorm::from_mask(in.mask_BL);
  return in;
}

TEST(PolicyLoss, ClipHigherAndDualClip) {
  PolicyLossInputs in = six_tokens();
  LossConfig cfg = dapo_config();
  expect_all_near(policy_token_loss(in, cfg), {-1.28, -0.5, 1.6, 1.2, 3.0, -0.55});
  PolicyLoss out = compute_policy_loss(in, cfg);
  EXPECT_NEAR(out.loss.item<double>(), 0.5783333, 1e-6);
  EXPECT_NEAR(out.metrics.pg_loss, 0.5783333, 1e-6);
  EXPECT_NEAR(out.metrics.clip_frac, 2.0 / 6, 1e-12);
  EXPECT_NEAR(out.metrics.dual_clip_frac, 1.0 / 6, 1e-12);
  EXPECT_NEAR(out.metrics.ratio_mean, 9.8 / 6, 1e-9);
  EXPECT_NEAR(out.metrics.ratio_max, 5.0, 1e-9);
  // sum (rho - 1 - ln rho) / 6 = 2.8937596 / 6
  EXPECT_NEAR(out.metrics.approx_kl, 0.4822933, 1e-6);
  EXPECT_DOUBLE_EQ(out.metrics.num_tokens, 6);

  cfg.dual_clip = 0;
  EXPECT_NEAR(compute_policy_loss(in, cfg).loss.item<double>(), 0.9116667, 1e-6);
  cfg.dual_clip = 3;
  cfg.eps_high = 0.2;
  EXPECT_NEAR(compute_policy_loss(in, cfg).loss.item<double>(), 0.5916667, 1e-6);
}

// Gradient per token: unclipped branch -A*rho/6; clipped and dual-clipped tokens 0.
//   t1: -0.5/6 = -0.0833333;  t3: 1.2/6 = 0.2;  t5: -0.55/6 = -0.0916667
TEST(PolicyLoss, GradientHandComputed) {
  PolicyLossInputs in = six_tokens();
  compute_policy_loss(in, dapo_config()).loss.backward();
  expect_all_near(in.logp_BL.grad(), {0, -0.0833333, 0, 0.2, 0, -0.0916667});
}

// Rows: [t0, t1, pad, pad] and [t2, t3, t4, t5] (row sums -1.78 and 5.25).
//   token-mean 3.47/6 = 0.5783333; seq-mean-token-mean (-0.89 + 1.3125)/2 = 0.21125;
//   seq-mean-token-sum-norm 3.47/(2*4) = 0.43375, with L_max = 8: 0.216875.
TEST(PolicyLoss, AggregationModes) {
  PolicyLossInputs one = six_tokens();
  at::Tensor logp = one.logp_BL.detach();
  auto two_rows = [](const at::Tensor& x6, double pad) {
    at::Tensor p = at::full({2}, pad, at::kDouble);
    return at::cat({x6.reshape({-1}).slice(0, 0, 2), p, x6.reshape({-1}).slice(0, 2, 6)}).reshape({2, 4});
  };
  PolicyLossInputs in;
  in.logp_BL = two_rows(logp, -0.3);
  in.old_logp_BL = two_rows(one.old_logp_BL, -4.0);  // junk in padding must not matter
  in.advantages_BL = two_rows(one.advantages_BL, 7.0);
  in.mask_BL = t({1, 1, 0, 0, 1, 1, 1, 1}, {2, 4});
  in.norm = LossNorm::from_mask(in.mask_BL);
  LossConfig cfg = dapo_config();
  std::vector<std::pair<LossAgg, double>> cases = {{LossAgg::kTokenMean, 0.5783333},
                                                    {LossAgg::kSeqMeanTokenMean, 0.21125},
                                                    {LossAgg::kSeqMeanTokenSumNorm, 0.43375}};
  for (auto [mode, want] : cases) {
    cfg.loss_agg = mode;
    EXPECT_NEAR(compute_policy_loss(in, cfg).loss.item<double>(), want, 1e-6) << name_of(mode);
  }
  in.norm = LossNorm::from_mask(in.mask_BL, 8);
  EXPECT_NEAR(compute_policy_loss(in, cfg).loss.item<double>(), 0.216875, 1e-6);
}

// Behaviour weights pi_old/pi_behav = [1, 3, 0.5, 1, 1, 1.5], cap C = 2:
//   TIS clamps 3 -> 2: [-1.28, -1.0, 0.8, 1.2, 3.0, -0.825], sum 1.895, mean 0.3158333
//   decoupled drops t1: [-1.28, 0, 0.8, 1.2, 3.0, -0.825], sum 2.895, mean 0.4825
TEST(PolicyLoss, TisAndDecoupled) {
  PolicyLossInputs in = six_tokens();
  std::vector<double> w = {1, 3, 0.5, 1, 1, 1.5}, behav(6);
  for (int i = 0; i < 6; ++i) behav[i] = kOld[i] - std::log(w[i]);
  in.behav_logp_BL = t(behav, {1, 6});
  LossConfig cfg = dapo_config();
  cfg.tis_cap = 2.0;
  cfg.behaviour_correction = BehaviourCorrection::kTis;
  PolicyLoss tis = compute_policy_loss(in, cfg);
  EXPECT_NEAR(tis.loss.item<double>(), 0.3158333, 1e-6);
  EXPECT_NEAR(tis.metrics.behav_weight_mean, 8.0 / 6, 1e-9);
  EXPECT_NEAR(tis.metrics.behav_capped_frac, 1.0 / 6, 1e-12);
  tis.loss.backward();
  // Unclipped tokens scaled by their weight: t1 -0.5*2/6, t3 1.2/6, t5 -0.55*1.5/6.
  expect_all_near(in.logp_BL.grad(), {0, -0.1666667, 0, 0.2, 0, -0.1375});

  cfg.behaviour_correction = BehaviourCorrection::kDecoupled;
  in.logp_BL.mutable_grad() = at::Tensor();
  PolicyLoss dec = compute_policy_loss(in, cfg);
  EXPECT_NEAR(dec.loss.item<double>(), 0.4825, 1e-6);
  EXPECT_NEAR(dec.metrics.behav_capped_frac, 1.0 / 6, 1e-12);
  dec.loss.backward();
  expect_all_near(in.logp_BL.grad(), {0, 0, 0, 0.2, 0, -0.1375});
}

// x = logp - ref = [0.5, -1, 0, 0.2, 0.1, 0.3], kl_coef 0.1:
//   k1: 0.5783333 + 0.1 * 0.1/6 = 0.58;  k2: 0.5783333 + 0.1 * (1.39/2)/6 = 0.5899167
// Entropy [1..6] (mean 3.5), entropy_coef 0.01: 0.5783333 - 0.035 = 0.5433333.
TEST(PolicyLoss, KlInLossAndEntropyBonus) {
  PolicyLossInputs in = six_tokens();
  std::vector<double> x = {0.5, -1, 0, 0.2, 0.1, 0.3}, ref(6);
  at::Tensor logp = in.logp_BL.detach().reshape({-1});
  for (int i = 0; i < 6; ++i) ref[i] = logp[i].item<double>() - x[i];
  in.ref_logp_BL = t(ref, {1, 6});
  LossConfig cfg = dapo_config();
  cfg.kl_coef = 0.1;
  cfg.kl_estimator = KlEstimator::kK1;
  PolicyLoss k1 = compute_policy_loss(in, cfg);
  EXPECT_NEAR(k1.loss.item<double>(), 0.58, 1e-6);
  EXPECT_NEAR(k1.metrics.kl_loss, 0.1 / 6, 1e-9);
  cfg.kl_estimator = KlEstimator::kK2;
  EXPECT_NEAR(compute_policy_loss(in, cfg).loss.item<double>(), 0.5899167, 1e-6);
  cfg.kl_in = KlPlacement::kReward;  // then the loss has no KL term
  EXPECT_NEAR(compute_policy_loss(in, cfg).loss.item<double>(), 0.5783333, 1e-6);

  LossConfig ent = dapo_config();
  ent.entropy_coef = 0.01;
  in.entropy_BL = t({1, 2, 3, 4, 5, 6}, {1, 6}).requires_grad_(true);
  PolicyLoss e = compute_policy_loss(in, ent);
  EXPECT_NEAR(e.loss.item<double>(), 0.5433333, 1e-6);
  EXPECT_NEAR(e.metrics.entropy, 3.5, 1e-12);
  e.loss.backward();
  expect_all_near(in.entropy_BL.grad(), std::vector<double>(6, -0.01 / 6));
}

// Random batch for the property tests; every row has at least one valid token.
PolicyLossInputs random_batch(int64_t b, int64_t l, uint64_t seed) {
  at::manual_seed(seed);
  PolicyLossInputs in;
  at::Tensor old = -at::rand({b, l}, at::kDouble) * 3 - 0.05;
  in.old_logp_BL = old;
  in.logp_BL = (old + at::randn({b, l}, at::kDouble) * 0.3).requires_grad_(true);
  in.behav_logp_BL = old + at::randn({b, l}, at::kDouble) * 0.4;
  in.ref_logp_BL = old + at::randn({b, l}, at::kDouble) * 0.2;
  in.advantages_BL = at::randn({b, l}, at::kDouble);
  in.entropy_BL = (at::rand({b, l}, at::kDouble) * 2).requires_grad_(true);
  in.mask_BL = (at::rand({b, l}, at::kDouble) > 0.3).to(at::kDouble);
  in.mask_BL.select(1, 0).fill_(1);
  in.norm = LossNorm::from_mask(in.mask_BL, l + 3);
  return in;
}

PolicyLossInputs rows(const PolicyLossInputs& full, int64_t begin, int64_t end, const at::Tensor& logp,
                      const at::Tensor& entropy) {
  PolicyLossInputs in = full;
  in.logp_BL = logp.slice(0, begin, end);
  in.entropy_BL = entropy.slice(0, begin, end);
  for (at::Tensor* x : {&in.old_logp_BL, &in.behav_logp_BL, &in.ref_logp_BL, &in.advantages_BL,
                        &in.mask_BL}) {
    *x = x->slice(0, begin, end);
  }
  return in;  // norm stays the full batch's
}

TEST(PolicyLoss, MicroBatchesSumToFullBatch) {
  for (LossAgg mode : {LossAgg::kTokenMean, LossAgg::kSeqMeanTokenMean, LossAgg::kSeqMeanTokenSumNorm}) {
    PolicyLossInputs full = random_batch(7, 5, 11);
    LossConfig cfg = dapo_config();
    cfg.loss_agg = mode;
    cfg.kl_coef = 0.05;
    cfg.entropy_coef = 0.01;
    cfg.behaviour_correction = BehaviourCorrection::kTis;
    PolicyLoss whole = compute_policy_loss(full, cfg);
    whole.loss.backward();
    at::Tensor g_logp = full.logp_BL.grad().clone(), g_ent = full.entropy_BL.grad().clone();

    at::Tensor logp = full.logp_BL.detach().clone().requires_grad_(true);
    at::Tensor ent = full.entropy_BL.detach().clone().requires_grad_(true);
    double sum = 0;
    for (auto [b, e] : std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {2, 3}, {3, 7}}) {
      PolicyLoss part = compute_policy_loss(rows(full, b, e, logp, ent), cfg);
      part.loss.backward();
      sum += part.loss.item<double>();
    }
    EXPECT_NEAR(sum, whole.loss.item<double>(), 1e-12) << name_of(mode);
    expect_tensors_near(logp.grad(), g_logp, 1e-12);
    expect_tensors_near(ent.grad(), g_ent, 1e-12);
  }
}

// With fresh samples (pi_behav = pi_old) TIS and decoupled give plain PPO's loss and grads.
TEST(PolicyLoss, FreshSamplesReduceToPlainPpo) {
  PolicyLossInputs in = random_batch(4, 6, 5);
  in.behav_logp_BL = in.old_logp_BL.clone();
  LossConfig cfg = dapo_config();
  PolicyLoss plain = compute_policy_loss(in, cfg);
  plain.loss.backward();
  at::Tensor g = in.logp_BL.grad().clone();
  EXPECT_GT(std::abs(plain.loss.item<double>()), 1e-3);
  for (BehaviourCorrection c : {BehaviourCorrection::kTis, BehaviourCorrection::kDecoupled}) {
    cfg.behaviour_correction = c;
    in.logp_BL.mutable_grad() = at::Tensor();
    PolicyLoss out = compute_policy_loss(in, cfg);
    out.loss.backward();
    EXPECT_NEAR(out.loss.item<double>(), plain.loss.item<double>(), 1e-12) << name_of(c);
    expect_tensors_near(in.logp_BL.grad(), g, 1e-12);
    EXPECT_NEAR(out.metrics.behav_weight_mean, 1.0, 1e-12);
    EXPECT_EQ(out.metrics.behav_capped_frac, 0.0);
  }
  // Without old logprobs (single on-policy step) rho = 1: loss = -token-mean(A).
  in.old_logp_BL = at::Tensor();
  cfg.behaviour_correction = BehaviourCorrection::kNone;
  at::Tensor want = -aggregate(in.advantages_BL, in.mask_BL, LossAgg::kTokenMean, in.norm);
  EXPECT_NEAR(compute_policy_loss(in, cfg).loss.item<double>(), want.item<double>(), 1e-12);
}

// NaN in the padding of every input: same loss and gradients as clean padding.
TEST(PolicyLoss, PaddingCannotPoison) {
  PolicyLossInputs clean = random_batch(3, 5, 21);
  LossConfig cfg = dapo_config();
  cfg.kl_coef = 0.1;
  cfg.behaviour_correction = BehaviourCorrection::kDecoupled;
  PolicyLoss want = compute_policy_loss(clean, cfg);
  want.loss.backward();
  PolicyLossInputs dirty = clean;
  dirty.logp_BL = clean.logp_BL.detach().clone().requires_grad_(true);
  at::Tensor pad = clean.mask_BL == 0;
  ASSERT_GT(pad.sum().item<int64_t>(), 0);
  for (at::Tensor* x : {&dirty.old_logp_BL, &dirty.behav_logp_BL, &dirty.ref_logp_BL, &dirty.advantages_BL}) {
    *x = x->masked_fill(pad, NAN);
  }
  PolicyLoss got = compute_policy_loss(dirty, cfg);
  got.loss.backward();
  EXPECT_NEAR(got.loss.item<double>(), want.loss.item<double>(), 1e-12);
  expect_tensors_near(dirty.logp_BL.grad(), clean.logp_BL.grad(), 1e-12);
  EXPECT_TRUE(std::isfinite(got.metrics.approx_kl));
}

TEST(PolicyLoss, RouterTermsScaled) {
  PolicyLossInputs in = six_tokens();
  LossConfig cfg = dapo_config();
  cfg.aux_loss_coef = 0.1;
  cfg.z_loss_coef = 0.01;
  const double ln3 = std::log(3.0);
  // Layer from aux_losses_test: lb = 1.0625 and z = mean(ln2^2, ln4^2, ln4^2, ln4^2).
  in.router_logits_TE = {t({0, 0, 0, ln3, 0, ln3, ln3, 0}, {4, 2})};
  in.topk_idx_TK = {at::tensor({1, 1, 1, 0}, at::kLong).reshape({4, 1})};
  in.num_experts = 2;
  in.aux_scale = 0.5;
  PolicyLoss out = compute_policy_loss(in, cfg);
  double z = (0.4804530 + 3 * 1.9218121) / 4;
  EXPECT_NEAR(out.metrics.lb_loss, 1.0625, 1e-6);
  EXPECT_NEAR(out.metrics.z_loss, z, 1e-6);
  EXPECT_NEAR(out.loss.item<double>(), 0.5783333 + 0.5 * (0.1 * 1.0625 + 0.01 * z), 1e-6);
}

TEST(PolicyLoss, MissingInputsAreBugs) {
  PolicyLossInputs in = six_tokens();
  LossConfig cfg = dapo_config();
  cfg.behaviour_correction = BehaviourCorrection::kTis;
  EXPECT_THROW(compute_policy_loss(in, cfg), Error);  // no behaviour logprobs
  cfg = dapo_config();
  cfg.kl_coef = 0.1;
  EXPECT_THROW(compute_policy_loss(in, cfg), Error);  // no reference logprobs
  cfg = dapo_config();
  cfg.entropy_coef = 0.1;
  EXPECT_THROW(compute_policy_loss(in, cfg), Error);  // no entropy
}

}  // namespace
}  // namespace moerl::rl
