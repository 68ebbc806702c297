// KL estimators k1/k2/k3 (values, clamp, gradient) and KL folded into rewards.
#include "rl/kl.h"

#include <gtest/gtest.h>

#include "rl/test_util.h"

namespace moerl::rl {
namespace {

using testing::expect_all_near;
using testing::t;

// x = logp - ref = [0.5, -1]:
//   k1 = [0.5, -1];  k2 = [0.125, 0.5];  k3 = [e^-0.5 - 0.5, e - 2] = [0.1065307, 0.7182818]
TEST(Kl, EstimatorsHandComputed) {
  at::Tensor logp = t({-1.0, -2.0}), ref = t({-1.5, -1.0});
  expect_all_near(kl_penalty(logp, ref, KlEstimator::kK1), {0.5, -1.0});
  expect_all_near(kl_penalty(logp, ref, KlEstimator::kK2), {0.125, 0.5});
  expect_all_near(kl_penalty(logp, ref, KlEstimator::kK3), {0.1065307, 0.7182818});
}

// k3 at x = -15 is e^15 - 16 and at x = 12 is 11.000006: both clamp to 10.
TEST(Kl, K3IsClampedToTen) {
  at::Tensor logp = t({-16.0, -1.0, -3.0}), ref = t({-1.0, -13.0, -3.0});
  expect_all_near(kl_penalty(logp, ref, KlEstimator::kK3), {10.0, 10.0, 0.0});
}

// d k3 / d logp = 1 - e^-x: x = 0.5 -> 0.3934693, x = -1 -> 1 - e = -1.7182818; clamped -> 0.
// d k2 / d logp = x; d k1 / d logp = 1.
TEST(Kl, Gradients) {
  at::Tensor ref = t({-1.5, -1.0, -13.0});
  for (auto [est, want] : std::vector<std::pair<KlEstimator, std::vector<double>>>{
           {KlEstimator::kK1, {1, 1, 1}},
           {KlEstimator::kK2, {0.5, -1, 12}},
           {KlEstimator::kK3, {0.3934693, -1.7182818, 0}}}) {
    at::Tensor logp = t({-1.0, -2.0, -1.0}).requires_grad_(true);
    kl_penalty(logp, ref, est).sum().backward();
    expect_all_near(logp.grad(), want);
  }
}

// rewards [0, 1] - 0.5 * [0.2, 0.4] = [-0.1, 0.8]; a masked token keeps its reward.
TEST(Kl, FoldIntoTokenRewards) {
  at::Tensor r = t({0, 1}, {1, 2}), kl = t({0.2, 0.4}, {1, 2});
  expect_all_near(fold_kl_into_rewards(r, kl, t({1, 1}, {1, 2}), 0.5), {-0.1, 0.8});
  expect_all_near(fold_kl_into_rewards(r, kl, t({1, 0}, {1, 2}), 0.5), {-0.1, 1.0});
}

// 1 - 0.5 * (0.2 + 0.4) = 0.7 (the third token is masked); 2 - 0.5 * 0.9 = 1.55.
TEST(Kl, FoldIntoOutcome) {
  at::Tensor kl = t({0.2, 0.4, 3.0, 0.5, 0.4, 0.0}, {2, 3});
  at::Tensor mask = t({1, 1, 0, 1, 1, 1}, {2, 3});
  expect_all_near(fold_kl_into_outcome(t({1, 2}), kl, mask, 0.5), {0.7, 1.55});
}

}  // namespace
}  // namespace moerl::rl
