// Clipped value loss for the PPO critic.
#include "rl/value_loss.h"

#include "base/check.h"

namespace moerl::rl {

at::Tensor value_token_loss(const ValueLossInputs& in, double value_clip) {
  MOERL_CHECK(in.mask_BL.defined() && in.mask_BL.dim() == 2) << "mask_BL must be [B, L]";
  check_same_shape(in.values_BL, in.mask_BL, "values_BL");
  check_same_shape(in.returns_BL, in.mask_BL, "returns_BL");
  // NOTE: neutral values in padding keep NaN/inf there out of the backward pass.
  at::Tensor valid = in.mask_BL.to(at::kBool), cur = in.values_BL.detach();
  at::Tensor ret = at::where(valid, in.returns_BL.detach().to(cur.scalar_type()), cur);
  at::Tensor unclipped = (in.values_BL - ret).pow(2);
  if (value_clip <= 0) return 0.5 * unclipped;
  check_same_shape(in.old_values_BL, in.mask_BL, "old_values_BL");
  at::Tensor old = at::where(valid, in.old_values_BL.detach().to(cur.scalar_type()), cur);
  at::Tensor v_clip = old + (in.values_BL - old).clamp(-value_clip, value_clip);
  return 0.5 * at::maximum(unclipped, (v_clip - ret).pow(2));
}

ValueLoss compute_value_loss(const ValueLossInputs& in, const LossConfig& cfg) {
  at::Tensor tok = value_token_loss(in, cfg.value_clip);
  at::Tensor agg = aggregate(tok, in.mask_BL, cfg.loss_agg, in.norm);
  ValueLoss out;
  out.loss = cfg.value_coef * agg;
  at::NoGradGuard no_grad;
  at::Tensor v = in.values_BL.detach().to(at::kDouble);
  at::Tensor ret = in.returns_BL.detach().to(at::kDouble);
  at::Tensor clip_frac = at::zeros({}, v.options());
  if (cfg.value_clip > 0) {
    at::Tensor old = in.old_values_BL.detach().to(at::kDouble);
    at::Tensor v_clip = old + (v - old).clamp(-cfg.value_clip, cfg.value_clip);
    clip_frac = masked_mean(((v_clip - ret).pow(2) > (v - ret).pow(2)).to(at::kDouble), in.mask_BL);
  }
  // NOTE: one host copy for all metrics (one device sync on GPU).
  at::Tensor host = at::stack({agg.detach().to(at::kDouble).reshape({}), clip_frac.reshape({}),
                               masked_mean(v, in.mask_BL).reshape({}),
                               masked_mean(ret, in.mask_BL).reshape({}),
                               in.mask_BL.to(at::kDouble).sum().reshape({})})
                         .cpu();
  const double* h = host.data_ptr<double>();
  out.metrics = ValueLossMetrics{h[0], h[1], h[2], h[3], h[4]};
  return out;
}

}  // namespace moerl::rl
