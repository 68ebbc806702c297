// Advantage estimators against hand-computed values: GRPO, Dr.GRPO, RLOO, token broadcast,
// outcome token rewards, GAE (gamma, lambda < 1, with padding holes) and whitening.
#include "rl/advantages.h"

#include <gtest/gtest.h>

#include "base/config.h"
#include "base/error.h"
#include "rl/test_util.h"

namespace moerl::rl {
namespace {

using testing::expect_all_near;
using testing::t;

// Group [1, 2, 3, 6]: mean 3, deviations [-2, -1, 0, 3], sum of squares 14,
// unbiased std sqrt(14/3) = 2.1602469 (+ eps 1e-6).  Group [0.5 x4]: no signal.
TEST(GroupAdvantages, GrpoHandComputed) {
  at::Tensor r = t({1, 2, 3, 6, 0.5, 0.5, 0.5, 0.5}, {2, 4});
  at::Tensor a = group_advantages(r, AdvEstimator::kGrpo);
  expect_all_near(a, {-0.9258197, -0.4629098, 0.0, 1.3887295, 0, 0, 0, 0});
}

TEST(GroupAdvantages, DrGrpoHasNoStdDivision) {
  at::Tensor r = t({1, 2, 3, 6, 0.5, 0.5, 0.5, 0.5}, {2, 4});
  expect_all_near(group_advantages(r, AdvEstimator::kDrGrpo), {-2, -1, 0, 3, 0, 0, 0, 0});
}

// RLOO: baseline of r_i is the mean of the other three: [11/3, 10/3, 3, 2].
TEST(GroupAdvantages, RlooLeaveOneOut) {
  at::Tensor r = t({1, 2, 3, 6}, {1, 4});
  expect_all_near(group_advantages(r, AdvEstimator::kRloo), {-2.6666667, -1.3333333, 0, 4});
}

TEST(GroupAdvantages, GroupOfOneIsZero) {
  at::Tensor r = t({5, -2}, {2, 1});
  for (AdvEstimator e : {AdvEstimator::kGrpo, AdvEstimator::kDrGrpo, AdvEstimator::kRloo}) {
    expect_all_near(group_advantages(r, e), {0, 0});
  }
}

TEST(GroupAdvantages, RandomGroupsAreStandardised) {
  at::manual_seed(3);
  at::Tensor r = at::rand({5, 7}, at::kDouble) + 0.1;
  at::Tensor a = group_advantages(r, AdvEstimator::kGrpo, 1e-12);
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_NEAR(a[i].mean().item<double>(), 0.0, 1e-9);
    EXPECT_NEAR(a[i].std(/*unbiased=*/true).item<double>(), 1.0, 1e-9);
  }
  // RLOO = G/(G-1) * (r - mean) exactly.
  at::Tensor rloo = group_advantages(r, AdvEstimator::kRloo);
  at::Tensor dr = group_advantages(r, AdvEstimator::kDrGrpo);
  EXPECT_LT((rloo - dr * (7.0 / 6.0)).abs().max().item<double>(), 1e-12);
  EXPECT_THROW(group_advantages(r, AdvEstimator::kGae), Error);
}

TEST(Broadcast, AdvantageOnValidTokensOnly) {
  at::Tensor mask = t({1, 1, 0, 0, 1, 1}, {2, 3});
  expect_all_near(broadcast_to_tokens(t({2, -1}), mask), {2, 2, 0, 0, -1, -1});
}

TEST(TokenRewards, OutcomeOnLastValidToken) {
  at::Tensor mask = t({1, 1, 0, 0, /**/ 0, 1, 1, 1, /**/ 0, 0, 0, 0}, {3, 4});
  expect_all_near(token_rewards(t({3, 5, 7}), mask), {0, 3, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0});
}

// gamma = 0.9, lambda = 0.5 (gamma*lambda = 0.45).
// Row 0 (valid 0..2, col 3 padding with junk): r = [0, 0, 1], V = [0.5, 0.4, 0.8]
//   t2: delta = 1 - 0.8 = 0.2                      A = 0.2
//   t1: delta = 0.9*0.8 - 0.4 = 0.32               A = 0.32 + 0.45*0.2  = 0.41
//   t0: delta = 0.9*0.4 - 0.5 = -0.14              A = -0.14 + 0.45*0.41 = 0.0445
// Row 1 (valid 0 and 2; 1 and 3 are holes): r = [0, _, 2, _], V = [0.3, _, 0.6, _]
//   t2: delta = 2 - 0.6 = 1.4                      A = 1.4
//   t0: delta = 0.9*0.6 - 0.3 = 0.24               A = 0.24 + 0.45*1.4 = 0.87
TEST(Gae, HandComputedWithHoles) {
  at::Tensor mask = t({1, 1, 1, 0, /**/ 1, 0, 1, 0}, {2, 4});
  at::Tensor r = t({0, 0, 1, 0, /**/ 0, 9, 2, 0}, {2, 4});
  at::Tensor v = t({0.5, 0.4, 0.8, 9, /**/ 0.3, 7, 0.6, 5}, {2, 4});
  Gae g = gae(r, v, mask, 0.9, 0.5);
  expect_all_near(g.advantages_BL, {0.0445, 0.41, 0.2, 0, 0.87, 0, 1.4, 0});
  expect_all_near(g.returns_BL, {0.5445, 0.81, 1.0, 0, 1.17, 0, 2.0, 0});
}

// gamma = lambda = 1 with an outcome reward only: A_t = R - V_t at every valid token.
TEST(Gae, UndiscountedOutcomeIsRewardMinusValue) {
  at::manual_seed(4);
  at::Tensor mask = (at::rand({4, 6}, at::kDouble) > 0.3).to(at::kDouble);
  mask.select(1, 0).fill_(1);
  at::Tensor outcome = at::rand({4}, at::kDouble) + 0.5;
  at::Tensor v = at::randn({4, 6}, at::kDouble);
  Gae g = gae(token_rewards(outcome, mask), v, mask, 1.0, 1.0);
  at::Tensor want = (outcome.unsqueeze(1) - v) * mask;
  EXPECT_LT((g.advantages_BL - want).abs().max().item<double>(), 1e-12);
  EXPECT_LT((g.returns_BL - outcome.unsqueeze(1) * mask).abs().max().item<double>(), 1e-12);
}

// Valid [1, 2, 3]: mean 2, population std sqrt(2/3) = 0.8164966.
TEST(Whiten, MaskedPopulationStd) {
  at::Tensor x = t({1, 2, 3, 100}, {2, 2});
  at::Tensor mask = t({1, 1, 1, 0}, {2, 2});
  expect_all_near(whiten(x, mask), {-1.2247449, 0, 1.2247449, 0});
}

TEST(ComputeAdvantages, GroupEstimatorBroadcastsPerGroup) {
  LossConfig cfg;
  cfg.group_size = 4;
  at::Tensor mask = at::ones({8, 2}, at::kDouble);
  mask[0][1] = 0;
  Advantages a = compute_advantages({.rewards_B = t({1, 2, 3, 6, 0.5, 0.5, 0.5, 0.5}), .mask_BL = mask}, cfg);
  expect_all_near(a.advantages_BL.select(1, 0), {-0.9258197, -0.4629098, 0.0, 1.3887295, 0, 0, 0, 0});
  EXPECT_EQ(a.advantages_BL[0][1].item<double>(), 0.0);
  EXPECT_FALSE(a.returns_BL.defined());
  cfg.group_size = 3;  // 8 rows are not whole groups of 3
  EXPECT_THROW(compute_advantages({.rewards_B = t({1, 2, 3, 6, 0.5, 0.5, 0.5, 0.5}), .mask_BL = mask}, cfg),
               Error);
}

// Dr.GRPO, G = 2, KL in the reward with coef 0.5: r' = [1 - 0.5*(0.2+0.4), 0 - 0.5*0] = [0.7, 0]
// (the masked 1.0 does not count) -> mean 0.35 -> [0.35, -0.35].
TEST(ComputeAdvantages, KlInRewardForGroups) {
  LossConfig cfg;
  cfg.group_size = 2;
  cfg.adv_estimator = AdvEstimator::kDrGrpo;
  cfg.kl_coef = 0.5;
  cfg.kl_in = KlPlacement::kReward;
  at::Tensor mask = t({1, 1, 1, 0}, {2, 2});
  Advantages a = compute_advantages(
      {.rewards_B = t({1, 0}), .mask_BL = mask, .kl_BL = t({0.2, 0.4, 0.0, 1.0}, {2, 2})}, cfg);
  expect_all_near(a.advantages_BL, {0.35, 0.35, -0.35, 0});
}

// GAE with KL in the reward: gamma 0.9, lambda 0.5, outcome 1, kl [0.2, 0.4], coef 0.5,
// V = [0.5, 0.4]: r = [-0.1, 0.8]; A1 = 0.8 - 0.4 = 0.4; delta0 = -0.1 + 0.36 - 0.5 = -0.24,
// A0 = -0.24 + 0.45*0.4 = -0.06; returns [0.44, 0.8]. Whitened: mean 0.17, std 0.23 -> [-1, 1].
TEST(ComputeAdvantages, GaeWithKlInRewardAndWhitening) {
  ConfigDoc doc = ConfigDoc::parse(
      "[algorithm]\nalgorithm = \"ppo\"\ngamma = 0.9\nlambda = 0.5\nkl_coef = 0.5\nkl_in = \"reward\"\n"
      "whiten_advantages = false\n", "job.toml");
  ConfigTable table = doc.root().table("algorithm");
  LossConfig cfg = read_loss_config(table);
  AdvantageInputs in{.rewards_B = t({1}), .mask_BL = t({1, 1}, {1, 2}), .values_BL = t({0.5, 0.4}, {1, 2}),
                     .kl_BL = t({0.2, 0.4}, {1, 2})};
  Advantages a = compute_advantages(in, cfg);
  expect_all_near(a.advantages_BL, {-0.06, 0.4});
  expect_all_near(a.returns_BL, {0.44, 0.8});
  cfg.whiten_advantages = true;
  expect_all_near(compute_advantages(in, cfg).advantages_BL, {-1, 1});
  in.values_BL = at::Tensor();
  EXPECT_THROW(compute_advantages(in, cfg), Error);
}

}  // namespace
}  // namespace moerl::rl
