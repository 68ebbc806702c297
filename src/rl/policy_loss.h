// The policy objective of one micro-batch: clipped surrogate (clip-higher, dual clip) with
// an optional behaviour-policy correction (TIS or AReaL's decoupled objective), plus the
// KL-to-reference, entropy and MoE router terms; aggregated over the GLOBAL batch so that
// summing the losses of all micro-batches gives the full-batch loss (and gradients).
// Tensor legend: B sequences, L response tokens, T routed tokens, E experts, K top-k.
//
//   PolicyLossInputs in;
//   in.logp_BL = policy_logp;  in.old_logp_BL = recomputed_logp;  in.behav_logp_BL = rollout_logp;
//   in.advantages_BL = adv;  in.mask_BL = mask;  in.norm = LossNorm::from_mask(full_mask, L_max);
//   PolicyLoss out = compute_policy_loss(in, cfg);
//   out.loss.backward();   // out.metrics: clip fraction, approx KL, entropy, ...
// Pure function (no I/O); missing required inputs are MOERL_CHECK failures.
#pragma once

#include <vector>

#include <ATen/ATen.h>

#include "rl/aggregation.h"
#include "rl/loss_config.h"

namespace moerl::rl {

constexpr double kLogRatioClamp = 20.0;

struct PolicyLossInputs {
  at::Tensor logp_BL;        // current policy pi_theta, sampled tokens (requires grad)
  at::Tensor old_logp_BL;    // pi_old (= pi_prox for decoupled), recomputed by the trainer;
                             // undefined -> logp_BL.detach() (a single on-policy step)
  at::Tensor behav_logp_BL;  // pi_behav recorded at generation; undefined -> old_logp_BL
  at::Tensor ref_logp_BL;    // frozen reference; needed when kl_coef > 0 and kl_in = loss
  at::Tensor advantages_BL;  // detached
  at::Tensor mask_BL;        // 1 on response tokens that count
  at::Tensor entropy_BL;     // token_entropy(logits); needed when entropy_coef > 0
  // MoE router outputs of this micro-batch, one entry per layer. Empty = no router terms.
  std::vector<at::Tensor> router_logits_TE;
  std::vector<at::Tensor> topk_idx_TK;
  at::Tensor router_token_mask_T;  // optional: 0 for padding tokens
  int64_t num_experts = 0;
  // Router losses are per-micro-batch statistics; they enter the total as
  // aux_scale * (aux_loss_coef * lb + z_loss_coef * z). Pass this micro-batch's share of
  // the global batch (e.g. its tokens / global tokens) so micro-batches add up to ~1.
  double aux_scale = 1.0;
  LossNorm norm;  // global-batch counts (see aggregation.h)
};

// Contributions (shares of the global loss) and token-level diagnostics of one micro-batch.
// Fields marked "local" are masked means over this micro-batch's valid tokens: weight
// them by num_tokens when combining micro-batches.
struct PolicyLossMetrics {
  double loss = 0;              // the total returned below
  double pg_loss = 0;           // aggregated surrogate term
  double kl_loss = 0;           // aggregated KL estimator, before kl_coef (0 without a reference);
                                // measured whenever ref_logp_BL is given, in the loss only with kl_in = loss
  double lb_loss = 0;           // load-balancing loss, before coefficients and aux_scale
  double z_loss = 0;            // router z-loss, before coefficients and aux_scale
  double entropy = 0;           // local: mean token entropy (0 when entropy_BL is absent)
  double clip_frac = 0;         // local: tokens where the clipped branch sets the loss
  double dual_clip_frac = 0;    // local: tokens (A < 0) capped by the dual clip
  double approx_kl = 0;         // local: mean of (rho - 1) - log rho, rho = pi_theta / pi_old
  double ratio_mean = 0;        // local: mean rho
  double ratio_max = 0;         // local: max rho (0 when no valid token)
  double behav_weight_mean = 0; // local: mean pi_old / pi_behav before truncation/filtering
  double behav_capped_frac = 0; // local: tokens truncated (tis), dropped (decoupled) or masked (mis)
  double mismatch_abs = 0;      // local: mean |log pi_old - log pi_behav| (rollout/trainer mismatch)
  double mismatch_kl = 0;       // local: mean k3 estimate of KL(pi_behav || pi_old)
  double num_tokens = 0;        // valid tokens in this micro-batch
};

struct PolicyLoss {
  at::Tensor loss;  // scalar, differentiable w.r.t. logp_BL (and entropy / router logits)
  PolicyLossMetrics metrics;
};

// Per-token surrogate loss before aggregation (exposed for tests and custom objectives):
//   rho = exp(clamp(logp - old, -20, 20))   (ratio_level = token)
//   rho = s_i = exp(mean_t (logp - old)) per sequence, gradient through each token's logp (GSPO)
//   l = max(-A*rho, -A*clip(rho, 1 - eps_low, 1 + eps_high));  A < 0 and c > 1: l = min(l, -c*A)
//   then times the behaviour weight w (detached):
//     none: 1;  tis: min(pi_old / pi_behav, C);  decoupled: pi_prox / pi_behav, 0 where > C;
//     mis: 1 where pi_old / pi_behav (token, or the sequence's geometric mean) lies in
//          [mis_lower, mis_upper], else 0
at::Tensor policy_token_loss(const PolicyLossInputs& in, const LossConfig& cfg);

PolicyLoss compute_policy_loss(const PolicyLossInputs& in, const LossConfig& cfg);

}  // namespace moerl::rl
