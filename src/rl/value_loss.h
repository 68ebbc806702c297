// The critic's clipped value loss (PPO), aggregated like the policy loss over the GLOBAL
// batch so that micro-batch losses sum to the full-batch loss.
// Tensor legend: B sequences, L response tokens.
//
//   ValueLossInputs in{values_BL, old_values_BL, returns_BL, mask_BL, norm};
//   ValueLoss out = compute_value_loss(in, cfg);   // out.loss = value_coef * aggregated loss
// Pure function; shape errors are MOERL_CHECK failures.
#pragma once

#include <ATen/ATen.h>

#include "rl/aggregation.h"
#include "rl/loss_config.h"

namespace moerl::rl {

struct ValueLossInputs {
  at::Tensor values_BL;      // current critic output (requires grad)
  at::Tensor old_values_BL;  // critic output at rollout time (detached)
  at::Tensor returns_BL;     // GAE returns (detached)
  at::Tensor mask_BL;
  LossNorm norm;
};

struct ValueLossMetrics {
  double value_loss = 0;   // aggregated, before value_coef
  double clip_frac = 0;    // local: tokens where the clipped branch is larger
  double value_mean = 0;   // local
  double return_mean = 0;  // local
  double num_tokens = 0;
};

struct ValueLoss {
  at::Tensor loss;  // value_coef * aggregate(l)
  ValueLossMetrics metrics;
};

// Per token: l = 0.5 * max((V - R)^2, (clip(V, V_old - eps_v, V_old + eps_v) - R)^2);
// value_clip = 0 gives l = 0.5 * (V - R)^2.
at::Tensor value_token_loss(const ValueLossInputs& in, double value_clip);

ValueLoss compute_value_loss(const ValueLossInputs& in, const LossConfig& cfg);

}  // namespace moerl::rl
