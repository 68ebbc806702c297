// Loss aggregation modes (hand-computed) and global normalisation counts.
#include "rl/aggregation.h"

#include <cmath>

#include <gtest/gtest.h>

#include "base/error.h"
#include "rl/test_util.h"

namespace moerl::rl {
namespace {

using testing::t;

// x = [[1, 2, (3)], [4, 5, 6]]: valid sum 18 over 5 tokens in 2 sequences.
//   token-mean 18/5 = 3.6;  seq-mean-token-mean (1.5 + 5)/2 = 3.25;  sum-norm 18/(2*4) = 2.25
TEST(Aggregate, ModesHandComputed) {
  at::Tensor x = t({1, 2, 3, 4, 5, 6}, {2, 3});
  at::Tensor mask = t({1, 1, 0, 1, 1, 1}, {2, 3});
  LossNorm norm = LossNorm::from_mask(mask, 4);
  EXPECT_DOUBLE_EQ(norm.num_tokens, 5);
  EXPECT_DOUBLE_EQ(norm.num_seqs, 2);
  EXPECT_DOUBLE_EQ(norm.max_len, 4);
  EXPECT_NEAR(aggregate(x, mask, LossAgg::kTokenMean, norm).item<double>(), 3.6, 1e-12);
  EXPECT_NEAR(aggregate(x, mask, LossAgg::kSeqMeanTokenMean, norm).item<double>(), 3.25, 1e-12);
  EXPECT_NEAR(aggregate(x, mask, LossAgg::kSeqMeanTokenSumNorm, norm).item<double>(), 2.25, 1e-12);
}

// A global norm twice the local counts halves every mode; an empty row adds nothing.
TEST(Aggregate, GlobalNormAndEmptyRows) {
  at::Tensor x = t({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  at::Tensor mask = t({1, 1, 0, 1, 1, 1, 0, 0, 0}, {3, 3});
  LossNorm local = LossNorm::from_mask(mask);
  EXPECT_DOUBLE_EQ(local.num_seqs, 2);  // the empty row is not a sequence
  EXPECT_DOUBLE_EQ(local.max_len, 3);
  LossNorm global = local + local;
  EXPECT_DOUBLE_EQ(global.num_tokens, 10);
  EXPECT_NEAR(aggregate(x, mask, LossAgg::kTokenMean, global).item<double>(), 1.8, 1e-12);
  EXPECT_NEAR(aggregate(x, mask, LossAgg::kSeqMeanTokenMean, global).item<double>(), 1.625, 1e-12);
  EXPECT_NEAR(aggregate(x, mask, LossAgg::kSeqMeanTokenSumNorm, global).item<double>(), 18.0 / 12,
              1e-12);
  EXPECT_NEAR(masked_mean(x, mask).item<double>(), 3.6, 1e-12);
}

// Gradient of token-mean is m / N; of seq-mean-token-mean m / (n_i * S).
TEST(Aggregate, Gradients) {
  at::Tensor mask = t({1, 1, 0, 1, 1, 1}, {2, 3});
  LossNorm norm = LossNorm::from_mask(mask);
  at::Tensor x = t({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_(true);
  aggregate(x, mask, LossAgg::kSeqMeanTokenMean, norm).backward();
  testing::expect_all_near(x.grad(), {0.25, 0.25, 0, 1.0 / 6, 1.0 / 6, 1.0 / 6});
}

// Padding may hold anything (NaN, inf); neither the value nor the gradient may see it.
TEST(Aggregate, PaddingCannotPoison) {
  at::Tensor mask = t({1, 1, 0, 1, 1, 1}, {2, 3});
  at::Tensor x = t({1, 2, NAN, 4, 5, 6}, {2, 3}).requires_grad_(true);
  at::Tensor y = aggregate(x, mask, LossAgg::kTokenMean, LossNorm::from_mask(mask));
  EXPECT_NEAR(y.item<double>(), 3.6, 1e-12);
  y.backward();
  testing::expect_all_near(x.grad(), {0.2, 0.2, 0, 0.2, 0.2, 0.2});
  EXPECT_NEAR(masked_mean(t({1, INFINITY}), t({1, 0})).item<double>(), 1.0, 1e-12);
}

TEST(Aggregate, ShapeMismatchIsABug) {
  at::Tensor mask = t({1, 1, 0, 1, 1, 1}, {2, 3});
  EXPECT_THROW(aggregate(t({1, 2, 3}, {1, 3}), mask, LossAgg::kTokenMean, LossNorm::from_mask(mask)),
               Error);
}

}  // namespace
}  // namespace moerl::rl
