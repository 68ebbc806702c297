// Clipped value loss against hand-computed values, with gradients and micro-batch sums.
#include "rl/value_loss.h"

#include <cmath>

#include <gtest/gtest.h>

#include "rl/test_util.h"

namespace moerl::rl {
namespace {

using testing::expect_all_near;
using testing::t;

// eps_v = 0.2; (V, V_old, R) -> 0.5 * max((V-R)^2, (clip(V)-R)^2):
//   t0 (1.0, 0.5, 1.2): max(0.04, (0.7-1.2)^2 = 0.25) -> 0.125   (clipped branch)
//   t1 (0.4, 0.5, 0.0): max(0.16, 0.16)               -> 0.08
//   t2 (0.0, 0.5, 0.1): max(0.01, (0.3-0.1)^2 = 0.04) -> 0.02    (clipped branch)
//   t3 (2.0, 1.0, 3.0): max(1.0,  (1.2-3)^2 = 3.24)   -> 1.62    (clipped branch)
//   t4 masked (junk)
// token-mean 1.845 / 4 = 0.46125; times value_coef 0.5 -> 0.230625. Unclipped: 0.605/4 = 0.15125.
ValueLossInputs four_tokens() {
  ValueLossInputs in;
  in.values_BL = t({1.0, 0.4, 0.0, 2.0, 50.0}, {1, 5}).requires_grad_(true);
  in.old_values_BL = t({0.5, 0.5, 0.5, 1.0, NAN}, {1, 5});     // padding may hold NaN
  in.returns_BL = t({1.2, 0.0, 0.1, 3.0, INFINITY}, {1, 5});
  in.mask_BL = t({1, 1, 1, 1, 0}, {1, 5});
  in.norm = LossNorm::from_mask(in.mask_BL);
  return in;
}

TEST(ValueLoss, ClippedHandComputed) {
  ValueLossInputs in = four_tokens();
  LossConfig cfg;
  cfg.value_clip = 0.2;
  cfg.value_coef = 0.5;
  expect_all_near(value_token_loss(in, 0.2).slice(1, 0, 4), {0.125, 0.08, 0.02, 1.62});
  ValueLoss out = compute_value_loss(in, cfg);
  EXPECT_NEAR(out.loss.item<double>(), 0.230625, 1e-9);
  EXPECT_NEAR(out.metrics.value_loss, 0.46125, 1e-9);
  EXPECT_NEAR(out.metrics.clip_frac, 0.75, 1e-12);
  EXPECT_NEAR(out.metrics.value_mean, 0.85, 1e-12);
  EXPECT_NEAR(out.metrics.return_mean, 1.075, 1e-12);
  out.loss.backward();
  // Only t1 is on the unclipped branch: 0.5 * (0.4 - 0) / 4 = 0.05.
  expect_all_near(in.values_BL.grad(), {0, 0.05, 0, 0, 0});
}

// No clipping: grads (V - R) / 4 = [-0.05, 0.1, -0.025, -0.25].
TEST(ValueLoss, UnclippedAndGradient) {
  ValueLossInputs in = four_tokens();
  LossConfig cfg;
  cfg.value_clip = 0;
  cfg.value_coef = 1;
  ValueLoss out = compute_value_loss(in, cfg);
  EXPECT_NEAR(out.loss.item<double>(), 0.15125, 1e-9);
  out.loss.backward();
  expect_all_near(in.values_BL.grad(), {-0.05, 0.1, -0.025, -0.25, 0});
}

TEST(ValueLoss, MicroBatchesSumToFullBatch) {
  at::manual_seed(9);
  ValueLossInputs full;
  full.values_BL = at::randn({6, 4}, at::kDouble).requires_grad_(true);
  full.old_values_BL = full.values_BL.detach() + at::randn({6, 4}, at::kDouble) * 0.3;
  full.returns_BL = at::randn({6, 4}, at::kDouble);
  full.mask_BL = (at::rand({6, 4}, at::kDouble) > 0.3).to(at::kDouble);
  full.mask_BL.select(1, 0).fill_(1);
  full.norm = LossNorm::from_mask(full.mask_BL);
  LossConfig cfg;
  cfg.loss_agg = LossAgg::kSeqMeanTokenMean;
  ValueLoss whole = compute_value_loss(full, cfg);
  whole.loss.backward();
  at::Tensor v = full.values_BL.detach().clone().requires_grad_(true);
  double sum = 0;
  for (int64_t b = 0; b < 6; b += 3) {
    ValueLossInputs part = full;
    part.values_BL = v.slice(0, b, b + 3);
    part.old_values_BL = full.old_values_BL.slice(0, b, b + 3);
    part.returns_BL = full.returns_BL.slice(0, b, b + 3);
    part.mask_BL = full.mask_BL.slice(0, b, b + 3);
    ValueLoss out = compute_value_loss(part, cfg);
    out.loss.backward();
    sum += out.loss.item<double>();
  }
  EXPECT_NEAR(sum, whole.loss.item<double>(), 1e-12);
  testing::expect_tensors_near(v.grad(), full.values_BL.grad(), 1e-12);
}

}  // namespace
}  // namespace moerl::rl
