// Reward-side helpers from DAPO: which prompt groups carry a learning signal (dynamic
// sampling drops groups whose rewards are all equal), and the soft overlong penalty.
// Tensor legend: N groups, G responses per group, B responses.
//
//   at::Tensor keep_N = group_has_signal(rewards_NG);            // bool
//   rewards_B += overlong_penalty(lengths_B, /*max_len=*/64, /*buffer_len=*/16);
// Pure functions; shape errors are MOERL_CHECK failures.
#pragma once

#include <ATen/ATen.h>

namespace moerl::rl {

// True for groups whose max - min reward exceeds tol (all-equal groups have advantage 0
// under every group estimator, so they only dilute the batch).
at::Tensor group_has_signal(const at::Tensor& rewards_NG, double tol = 1e-9);

// 0 for length <= max_len - buffer_len, then linear down to -1 at max_len (and -1 beyond):
//   penalty = -clamp((length - (max_len - buffer_len)) / buffer_len, 0, 1)
// buffer_len = 0 gives 0 up to max_len and -1 beyond it. Returns float64 [B].
at::Tensor overlong_penalty(const at::Tensor& lengths_B, int64_t max_len, int64_t buffer_len);

}  // namespace moerl::rl
