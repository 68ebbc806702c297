// The objective variants beyond clipped PPO, against hand-worked values: GSPO's sequence
// ratio, masked importance sampling (token and sequence), the k3+ KL estimator, k1 refused in
// the loss, the rollout/trainer mismatch metrics, and the soft overlong penalty through
// compute_advantages.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "rl/advantages.h"
#include "rl/kl.h"
#include "rl/policy_loss.h"
#include "rl/test_util.h"

namespace moerl::rl {
namespace {

using testing::expect_all_near;
using testing::t;

LossConfig plain() {
  LossConfig c;
  c.aux_loss_coef = 0;
  c.z_loss_coef = 0;
  return c;
}

// Two sequences: row 0 has 3 valid tokens with log ratios 0.3, -0.1, 0.1 (mean 0.1), row 1
// has 2 valid tokens (log ratios 0.02, 0.04: mean 0.03) and a pad.
PolicyLossInputs two_rows() {
  PolicyLossInputs in;
  std::vector<double> old = {-1.0, -2.0, -0.5, -1.5, -0.7, 0.0};
  std::vector<double> lr = {0.3, -0.1, 0.1, 0.02, 0.04, 0.0};
  std::vector<double> logp(6);
  for (int i = 0; i < 6; ++i) logp[i] = old[i] + lr[i];
  in.logp_BL = t(logp, {2, 3}).requires_grad_(true);
  in.old_logp_BL = t(old, {2, 3});
  in.advantages_BL = t({1, 1, 1, -2, -2, 0}, {2, 3});
  in.mask_BL = t({1, 1, 1, 1, 1, 0}, {2, 3});
  in.norm = LossNorm::from_mask(in.mask_BL);
  return in;
}

// GSPO by hand, eps 0.05 both sides. Row 0: s_0 = exp(0.1) = 1.10517, A = 1:
// max(-1.10517, -1.05) = -1.05 on each of its tokens (clipped). Row 1: s_1 = exp(0.03) =
// 1.03045 lies inside the band, A = -2: 2 s_1 on each token. seq-mean-token-mean:
// (-1.05 + 2 s_1) / 2.
TEST(Gspo, SequenceRatioClippedPerSequence) {
  LossConfig c = plain();
  c.ratio_level = RatioLevel::kSequence;
  c.loss_agg = LossAgg::kSeqMeanTokenMean;
  c.eps_low = 0.05;
  c.eps_high = 0.05;
  PolicyLossInputs in = two_rows();
  const double s1 = std::exp(0.03);
  expect_all_near(policy_token_loss(in, c), {-1.05, -1.05, -1.05, 2 * s1, 2 * s1, 0.0}, 1e-9);
  PolicyLoss out = compute_policy_loss(in, c);
  EXPECT_NEAR(out.loss.item<double>(), (-1.05 + 2 * s1) / 2, 1e-9);
  // The clipped sequence has no gradient; the other's is A * s_1 * grad(mean_t logp) / 2 seqs:
  // d/dlogp_t of -(-2) * s_1 = 2 s_1 / n_tokens(2) / num_seqs(2) per token.
  out.loss.backward();
  expect_all_near(in.logp_BL.grad(), {0, 0, 0, 2 * s1 / 2 / 2, 2 * s1 / 2 / 2, 0}, 1e-9);
  EXPECT_NEAR(out.metrics.clip_frac, 3.0 / 5.0, 1e-12);  // row 0's three tokens
}

TEST(Gspo, ReadsAsSequenceLevelWithSequenceMeanByDefault) {
  ConfigDoc doc = ConfigDoc::parse("[algorithm]\nratio_level = \"sequence\"\n", "job.toml");
  ConfigTable tab = doc.root().table("algorithm");
  LossConfig c = read_loss_config(tab);
  EXPECT_EQ(c.ratio_level, RatioLevel::kSequence);
  EXPECT_EQ(c.loss_agg, LossAgg::kSeqMeanTokenMean);
}

// Behaviour logprobs so that pi_old / pi_behav per token is e^0.9, 1, e^-0.9 | 1, e^0.2.
PolicyLossInputs with_behaviour() {
  PolicyLossInputs in = two_rows();
  in.behav_logp_BL = in.old_logp_BL - t({0.9, 0, -0.9, 0, 0.2, 0}, {2, 3});
  return in;
}

TEST(Mis, TokenLevelMasksTokensOutsideTheBand) {
  LossConfig c = plain();
  c.behaviour_correction = BehaviourCorrection::kMis;
  c.mis_lower = 0.5;
  c.mis_upper = 2.0;  // e^0.9 = 2.46 and e^-0.9 = 0.41 leave it
  PolicyLossInputs in = with_behaviour();
  at::Tensor base = policy_token_loss(two_rows(), plain());
  at::Tensor got = policy_token_loss(in, c);
  expect_all_near(got, {0, base[0][1].item<double>(), 0, base[1][0].item<double>(), base[1][1].item<double>(), 0});
  PolicyLoss out = compute_policy_loss(in, c);
  EXPECT_NEAR(out.metrics.behav_capped_frac, 2.0 / 5.0, 1e-12);
}

TEST(Mis, SequenceLevelUsesTheGeometricMeanOfTheRow) {
  LossConfig c = plain();
  c.behaviour_correction = BehaviourCorrection::kMis;
  c.mis_level = MisLevel::kSequence;
  c.mis_lower = 0.9;
  c.mis_upper = 1.05;  // row 0: exp(mean(0.9, 0, -0.9)) = 1 kept; row 1: exp(0.1) = 1.105 masked
  PolicyLossInputs in = with_behaviour();
  at::Tensor base = policy_token_loss(two_rows(), plain());
  expect_all_near(policy_token_loss(in, c),
                  {base[0][0].item<double>(), base[0][1].item<double>(), base[0][2].item<double>(), 0, 0, 0});
  EXPECT_NEAR(compute_policy_loss(in, c).metrics.behav_capped_frac, 2.0 / 5.0, 1e-12);
}

TEST(Mismatch, MetricsMeasureTheGapBetweenBehaviourAndOld) {
  PolicyLossInputs in = with_behaviour();
  PolicyLossMetrics m = compute_policy_loss(in, plain()).metrics;  // measured even without correction
  EXPECT_NEAR(m.mismatch_abs, (0.9 + 0 + 0.9 + 0 + 0.2) / 5, 1e-12);
  auto k3 = [](double x) { return std::exp(x) - 1 - x; };  // x = log pi_old - log pi_behav
  EXPECT_NEAR(m.mismatch_kl, (k3(0.9) + k3(0) + k3(-0.9) + k3(0) + k3(0.2)) / 5, 1e-12);
  EXPECT_NEAR(compute_policy_loss(two_rows(), plain()).metrics.mismatch_abs, 0.0, 1e-15);
}

TEST(KlEstimators, K3PlusHasTheValueOfK3AndTheGradientOfK2) {
  at::Tensor logp = t({-0.5, -2.0, -1.0}).requires_grad_(true);
  at::Tensor ref = t({-1.0, -1.0, -1.0});
  at::Tensor v = kl_penalty(logp, ref, KlEstimator::kK3Plus);
  expect_all_near(v, {std::exp(-0.5) - 1 + 0.5, std::exp(1.0) - 1 - 1.0, 0.0}, 1e-12);
  v.sum().backward();
  expect_all_near(logp.grad(), {0.5, -1.0, 0.0}, 1e-12);  // d(x^2/2)/dlogp = x
}

TEST(KlEstimators, K1IsRefusedInTheLossButAllowedInTheReward) {
  auto read = [](const std::string& placement) {
    ConfigDoc doc = ConfigDoc::parse(
        "[algorithm]\nkl_coef = 0.05\nkl_estimator = \"k1\"\nkl_in = \"" + placement + "\"\n", "job.toml");
    ConfigTable tab = doc.root().table("algorithm");
    return read_loss_config(tab);
  };
  try {
    read("loss");
    ADD_FAILURE() << "k1 in the loss was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("zero expected gradient"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("k3+"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read("reward").kl_estimator, KlEstimator::kK1);
}

// The soft overlong penalty enters the rewards before the group baseline: lengths 2, 6, 8
// with L_max 8 and a buffer of 4 give penalties 0, -0.5, -1.
TEST(Advantages, OverlongPenaltyShapesRewardsBeforeTheBaseline) {
  LossConfig c = plain();
  c.adv_estimator = AdvEstimator::kDrGrpo;
  c.group_size = 3;
  c.overlong_buffer = 4;
  AdvantageInputs in;
  in.rewards_B = at::ones({3}, at::kDouble);
  in.mask_BL = at::zeros({3, 8}, at::kDouble);
  in.mask_BL[0].narrow(0, 0, 2).fill_(1);
  in.mask_BL[1].narrow(0, 0, 6).fill_(1);
  in.mask_BL[2].fill_(1);
  in.max_new_tokens = 8;
  Advantages a = compute_advantages(in, c);
  // shaped rewards 1, 0.5, 0 -> Dr.GRPO advantages 0.5, 0, -0.5 on every valid token
  expect_all_near(a.advantages_BL.select(1, 0), {0.5, 0.0, -0.5}, 1e-12);
  c.overlong_buffer = 0;
  expect_all_near(compute_advantages(in, c).advantages_BL.select(1, 0), {0.0, 0.0, 0.0}, 1e-12);
}

}  // namespace
}  // namespace moerl::rl
