// Soft overlong penalty against hand-computed values.
#include "rl/reward_shaping.h"

#include <gtest/gtest.h>

#include "rl/test_util.h"

namespace moerl::rl {
namespace {

using testing::expect_all_near;
using testing::t;

// max_len 64, buffer 16: free up to 48; 56 -> -0.5; 60 -> -0.75; 64 and 70 -> -1.
TEST(RewardShaping, OverlongPenalty) {
  at::Tensor len = at::tensor({10, 48, 56, 60, 64, 70}, at::kLong);
  expect_all_near(overlong_penalty(len, 64, 16), {0, 0, -0.5, -0.75, -1, -1});
  expect_all_near(overlong_penalty(len, 64, 0), {0, 0, 0, 0, 0, -1});
}

}  // namespace
}  // namespace moerl::rl
