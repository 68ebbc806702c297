// Reward-side helper from DAPO: the soft overlong penalty. (DAPO's dynamic sampling is
// rollout.dynamic_sampling, with runtime::has_signal deciding per prompt group.)
// Tensor legend: B responses.
//
//   rewards_B += overlong_penalty(lengths_B, /*max_len=*/64, /*buffer_len=*/16);
// Pure functions; shape errors are MOERL_CHECK failures.
#pragma once

#include <ATen/ATen.h>

namespace moerl::rl {

// 0 for length <= max_len - buffer_len, then linear down to -1 at max_len (and -1 beyond):
//   penalty = -clamp((length - (max_len - buffer_len)) / buffer_len, 0, 1)
// buffer_len = 0 gives 0 up to max_len and -1 beyond it. Returns float64 [B].
at::Tensor overlong_penalty(const at::Tensor& lengths_B, int64_t max_len, int64_t buffer_len);

}  // namespace moerl::rl
