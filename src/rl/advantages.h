// Advantage estimators: group-relative (GRPO, Dr.GRPO, RLOO) on outcome rewards, and GAE
// on token rewards with a critic's values. No autograd: call on detached tensors.
// Tensor legend: N groups (prompts), G responses per group, B = N*G sequences, L tokens.
//
//   at::Tensor adv_NG = group_advantages(rewards_NG, AdvEstimator::kGrpo);
//   at::Tensor adv_BL = broadcast_to_tokens(adv_NG.reshape({-1}), mask_BL);
//   Gae g = gae(token_rewards(outcome_B, mask_BL), values_BL, mask_BL, 1.0, 0.95);
//   Advantages a = compute_advantages({.rewards_B = r, .mask_BL = m}, cfg);  // all of it, per cfg
// Pure functions; shape errors are MOERL_CHECK failures (a bug in the caller).
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <vector>

#include "rl/loss_config.h"

namespace moerl::rl {

// rewards_NG -> advantages_NG (float64 math, returned in the rewards' dtype):
//   kGrpo:   (r - mean_g) / (std_g + eps), std with Bessel's correction (G - 1)
//   kDrGrpo: r - mean_g
//   kRloo:   r - mean of the other G - 1 rewards  (= G/(G-1) * (r - mean_g))
// A group of one (G = 1) gets advantage 0. kGae is rejected (it needs values).
at::Tensor group_advantages(const at::Tensor& rewards_NG, AdvEstimator estimator,
                            double eps = 1e-6);

// adv_B -> adv_BL: every valid token of a sequence gets the sequence's advantage; 0 elsewhere.
at::Tensor broadcast_to_tokens(const at::Tensor& adv_B, const at::Tensor& mask_BL);

// Token rewards for a critic: the outcome reward r_i sits on the last valid token of row i,
// 0 elsewhere (and on rows without valid tokens).
at::Tensor token_rewards(const at::Tensor& outcome_B, const at::Tensor& mask_BL);

struct Gae {
  at::Tensor advantages_BL;  // 0 at masked positions
  at::Tensor returns_BL;     // advantages + values at valid positions, 0 elsewhere
};

// Generalised advantage estimation over the valid tokens of each row (masked positions are
// skipped, so left/right padding and holes are fine; V after the last valid token is 0):
//   delta_t = r_t + gamma * V_next - V_t,   A_t = delta_t + gamma * lambda * A_next
// Returns are computed before any whitening.
Gae gae(const at::Tensor& rewards_BL, const at::Tensor& values_BL, const at::Tensor& mask_BL,
        double gamma, double lambda);

// (x - mean) / (std + 1e-8) over the valid tokens of the whole batch (population std);
// 0 at masked positions.
// Sums partial statistics over data-parallel ranks (identity on one rank).
using SumOverRanks = std::function<std::vector<double>(const std::vector<double>&)>;
// With `sum_over_ranks`, mean and variance are those of every rank's valid tokens together
// (two all-reduces: the mean, then the squared deviations, as the one-rank formula).
at::Tensor whiten(const at::Tensor& x_BL, const at::Tensor& mask_BL, const SumOverRanks& sum_over_ranks = nullptr);

struct AdvantageInputs {
  at::Tensor rewards_B;  // outcome reward per response; rows group-major (G consecutive rows
                         // share a prompt, G = cfg.group_size)
  at::Tensor mask_BL;    // response mask
  at::Tensor values_BL;  // critic values at rollout time; needed for gae
  at::Tensor kl_BL;      // per-token KL estimate (kl_penalty of old vs ref); needed when
                         // cfg.kl_in = reward and cfg.kl_coef > 0
  int64_t group_size = 0;        // responses per prompt; 0 = cfg.group_size
  int64_t max_new_tokens = 0;    // L_max of the overlong penalty (cfg.overlong_buffer > 0)
  SumOverRanks sum_over_ranks;   // data parallelism: whitening over every rank's tokens
};

struct Advantages {
  at::Tensor advantages_BL;
  at::Tensor returns_BL;  // critic targets (gae only; undefined otherwise)
};

// The trainer's one call: the soft overlong penalty (cfg.overlong_buffer > 0: rewards +=
// overlong_penalty(response lengths, max_new_tokens, overlong_buffer)), then cfg.adv_estimator,
// KL-in-reward (fold_kl_into_outcome for group estimators, fold_kl_into_rewards for gae) and,
// for gae, whiten_advantages (global statistics under data parallelism).
Advantages compute_advantages(const AdvantageInputs& in, const LossConfig& cfg);

}  // namespace moerl::rl
