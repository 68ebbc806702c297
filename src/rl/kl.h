// KL to a frozen reference policy, per token, from sampled-token logprobs only.
// x = logp - ref_logp (samples drawn from the policy):
//   k1 = x,  k2 = x^2 / 2,  k3 = exp(-x) - 1 + x  (>= 0; clamped to [-10, 10]),
//   k3+ = the value of k3 with the gradient of k2 (straight-through).
// Gradients in the loss (expectation over samples of pi_theta): k1 zero (E[grad log pi] = 0,
// so LossConfig rejects k1 in the loss); k2 and k3+ grad KL(pi_theta || pi_ref), the penalty's
// intended direction; k3 grad KL(pi_ref || pi_theta), the other direction. docs/rl.md derives them.
//
//   at::Tensor kl_BL = kl_penalty(logp_BL, ref_logp_BL, KlEstimator::kK3);
//   at::Tensor r_BL = fold_kl_into_rewards(token_rewards_BL, kl_BL, mask_BL, 0.05);
// Pure functions; differentiable in logp (k3's clamp stops the gradient beyond +-10).
#pragma once

#include <ATen/ATen.h>

#include "rl/loss_config.h"

namespace moerl::rl {

constexpr double kK3Clamp = 10.0;

at::Tensor kl_penalty(const at::Tensor& logp, const at::Tensor& ref_logp, KlEstimator estimator);

// KL in the reward, for a critic: r_t - coef * kl_t at valid tokens (kl is detached).
at::Tensor fold_kl_into_rewards(const at::Tensor& rewards_BL, const at::Tensor& kl_BL,
                                const at::Tensor& mask_BL, double coef);

// KL in the reward, for outcome-reward estimators (GRPO): r_i - coef * sum_t kl_it m_it.
at::Tensor fold_kl_into_outcome(const at::Tensor& outcome_B, const at::Tensor& kl_BL,
                                const at::Tensor& mask_BL, double coef);

}  // namespace moerl::rl
