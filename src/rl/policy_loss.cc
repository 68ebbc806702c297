// Clipped / dual-clipped surrogate with behaviour correction, plus KL, entropy and router
// terms, aggregated over the global batch.
#include "rl/policy_loss.h"

#include "base/check.h"
#include "rl/aux_losses.h"
#include "rl/kl.h"

namespace moerl::rl {

namespace {

struct TokenTerms {
  at::Tensor loss_BL;          // weighted surrogate per token
  at::Tensor ratio_BL;         // rho (detached)
  at::Tensor clipped_BL;       // bool
  at::Tensor dual_clipped_BL;  // bool
  at::Tensor weight_raw_BL;    // pi_old / pi_behav before the cap (detached)
  at::Tensor capped_BL;        // bool
  at::Tensor mismatch_abs_BL;  // |log pi_old - log pi_behav| (detached)
  at::Tensor mismatch_kl_BL;   // k3 estimate of KL(pi_behav || pi_old) per token (detached)
};

// Per-row mean of x over the valid tokens, [B, 1] (0 for rows without any).
at::Tensor sequence_mean(const at::Tensor& x_BL, const at::Tensor& valid_BL) {
  at::Tensor m = valid_BL.to(x_BL.scalar_type());
  return (x_BL * m).sum(1, /*keepdim=*/true) / m.sum(1, /*keepdim=*/true).clamp_min(1);
}

TokenTerms token_terms(const PolicyLossInputs& in, const LossConfig& cfg) {
  const at::Tensor& mask = in.mask_BL;
  MOERL_CHECK(mask.defined() && mask.dim() == 2) << "mask_BL must be [B, L]";
  check_same_shape(in.logp_BL, mask, "logp_BL");
  check_same_shape(in.advantages_BL, mask, "advantages_BL");
  at::Tensor old = in.old_logp_BL.defined() ? in.old_logp_BL.detach() : in.logp_BL.detach();
  check_same_shape(old, mask, "old_logp_BL");
  if (cfg.behaviour_correction != BehaviourCorrection::kNone) {
    MOERL_CHECK(in.behav_logp_BL.defined())
        << "behaviour_correction = " << name_of(cfg.behaviour_correction)
        << " needs the behaviour logprobs recorded at generation";
  }
  at::Tensor behav = in.behav_logp_BL.defined() ? in.behav_logp_BL.detach() : old;
  check_same_shape(behav, mask, "behav_logp_BL");

  // NOTE: padding may hold anything; neutral values there keep NaN/inf out of the backward
  // pass too (a zero upstream gradient times NaN is still NaN).
  at::Tensor valid = mask.to(at::kBool);
  at::Tensor cur = in.logp_BL.detach();
  old = at::where(valid, old, cur);
  behav = at::where(valid, behav, old);
  at::Tensor adv = in.advantages_BL.detach().to(in.logp_BL.scalar_type());
  adv = at::where(valid, adv, at::zeros_like(adv));
  TokenTerms t;
  at::Tensor log_ratio = in.logp_BL - old;
  if (cfg.ratio_level == RatioLevel::kSequence) {
    // GSPO: every token of sequence i carries s_i = exp(mean_t (logp - old)) as its value and
    // the gradient of its own logp (scaled by s_i): under seq-mean-token-mean this is exactly
    // the gradient of min(s_i A_i, clip(s_i) A_i) averaged over sequences.
    log_ratio = sequence_mean(log_ratio.detach(), valid) + (in.logp_BL - cur);
  }
  at::Tensor ratio = at::exp(log_ratio.clamp(-kLogRatioClamp, kLogRatioClamp));
  at::Tensor surr1 = -adv * ratio;
  at::Tensor surr2 = -adv * ratio.clamp(1.0 - cfg.eps_low, 1.0 + cfg.eps_high);
  at::Tensor loss = at::maximum(surr1, surr2);
  t.clipped_BL = (surr2 > surr1).detach();
  if (cfg.dual_clip > 0) {
    at::Tensor cap = -cfg.dual_clip * adv;
    at::Tensor neg = adv < 0;
    t.dual_clipped_BL = (neg & (cap < loss)).detach();
    loss = at::where(neg, at::minimum(loss, cap), loss);
  } else {
    t.dual_clipped_BL = at::zeros_like(t.clipped_BL);
  }

  at::Tensor w_raw = at::exp((old - behav).clamp(-kLogRatioClamp, kLogRatioClamp));
  t.weight_raw_BL = w_raw;
  switch (cfg.behaviour_correction) {
    case BehaviourCorrection::kNone:
      t.capped_BL = at::zeros_like(t.clipped_BL);
      break;
    case BehaviourCorrection::kTis:
      t.capped_BL = w_raw > cfg.tis_cap;
      loss = loss * w_raw.clamp(0.0, cfg.tis_cap).to(loss.scalar_type());
      break;
    case BehaviourCorrection::kDecoupled:
      // NOTE: as AReaL's behav_imp_weight_cap: tokens whose weight exceeds the cap are
      // dropped (weight 0), not truncated; they still count in the global denominator.
      t.capped_BL = w_raw > cfg.tis_cap;
      loss = loss * at::where(t.capped_BL, at::zeros_like(w_raw), w_raw).to(loss.scalar_type());
      break;
    case BehaviourCorrection::kMis: {
      // Masked importance sampling: tokens (or whole sequences, by the geometric mean of their
      // token ratios) whose pi_old / pi_behav leaves [lower, upper] are masked from the loss;
      // kept tokens keep weight 1. Masked tokens still count in the global denominator.
      at::Tensor r = cfg.mis_level == MisLevel::kToken
                         ? w_raw
                         : at::exp(sequence_mean(old - behav, valid).clamp(-kLogRatioClamp, kLogRatioClamp))
                               .expand_as(w_raw);
      t.capped_BL = (r < cfg.mis_lower) | (r > cfg.mis_upper);
      loss = loss * at::logical_not(t.capped_BL).to(loss.scalar_type());
      break;
    }
  }
  t.mismatch_abs_BL = (old - behav).abs();
  t.mismatch_kl_BL = w_raw - 1.0 - (old - behav).clamp(-kLogRatioClamp, kLogRatioClamp);
  t.loss_BL = loss;
  t.ratio_BL = ratio.detach();
  return t;
}

}  // namespace

at::Tensor policy_token_loss(const PolicyLossInputs& in, const LossConfig& cfg) {
  return token_terms(in, cfg).loss_BL;
}

PolicyLoss compute_policy_loss(const PolicyLossInputs& in, const LossConfig& cfg) {
  TokenTerms t = token_terms(in, cfg);
  const at::Tensor& mask = in.mask_BL;
  at::Tensor pg = aggregate(t.loss_BL, mask, cfg.loss_agg, in.norm);
  at::Tensor total = pg;
  at::Tensor zero = at::zeros({}, pg.options());
  at::Tensor kl_loss = zero, lb_loss = zero, z_loss = zero, entropy = zero;

  const bool kl_in_loss = cfg.kl_coef > 0 && cfg.kl_in == KlPlacement::kLoss;
  MOERL_CHECK(!kl_in_loss || in.ref_logp_BL.defined()) << "kl_coef > 0 with kl_in = loss needs ref_logp_BL";
  if (in.ref_logp_BL.defined()) {  // in the loss, or only measured (kl_in = reward)
    check_same_shape(in.ref_logp_BL, mask, "ref_logp_BL");
    at::Tensor ref = at::where(mask.to(at::kBool), in.ref_logp_BL.detach(), in.logp_BL.detach());
    kl_loss = aggregate(kl_penalty(kl_in_loss ? in.logp_BL : in.logp_BL.detach(), ref, cfg.kl_estimator), mask,
                        cfg.loss_agg, in.norm);
    if (kl_in_loss) total = total + cfg.kl_coef * kl_loss;
  }
  if (in.entropy_BL.defined()) {
    check_same_shape(in.entropy_BL, mask, "entropy_BL");
    entropy = masked_mean(in.entropy_BL.detach().to(pg.scalar_type()), mask);
    if (cfg.entropy_coef > 0) {
      total = total - cfg.entropy_coef * aggregate(in.entropy_BL, mask, cfg.loss_agg, in.norm);
    }
  } else {
    MOERL_CHECK(cfg.entropy_coef == 0) << "entropy_coef > 0 needs entropy_BL";
  }
  if (!in.router_logits_TE.empty()) {
    MOERL_CHECK_GT(in.num_experts, 0) << "router terms need num_experts";
    lb_loss = load_balancing_loss(in.router_logits_TE, in.topk_idx_TK, in.num_experts,
                                  in.router_token_mask_T);
    z_loss = router_z_loss(in.router_logits_TE, in.router_token_mask_T);
    total = total + in.aux_scale * (cfg.aux_loss_coef * lb_loss + cfg.z_loss_coef * z_loss)
                                       .to(total.scalar_type());
  }

  // NOTE: every metric goes to the host in one copy (one device sync per call on GPU).
  at::NoGradGuard no_grad;
  at::Tensor valid = mask.to(at::kBool);
  at::Tensor rho = t.ratio_BL.to(at::kDouble);
  at::Tensor rho_max = at::where(valid, rho, at::zeros_like(rho)).max();
  std::vector<at::Tensor> values = {
      total, pg, kl_loss, lb_loss, z_loss, entropy,
      masked_mean(t.clipped_BL.to(at::kDouble), mask),
      masked_mean(t.dual_clipped_BL.to(at::kDouble), mask),
      masked_mean(rho - 1.0 - rho.log(), mask),
      masked_mean(rho, mask),
      rho_max,
      masked_mean(t.weight_raw_BL.to(at::kDouble), mask),
      masked_mean(t.capped_BL.to(at::kDouble), mask),
      valid.sum(),
      masked_mean(t.mismatch_abs_BL.to(at::kDouble), mask),
      masked_mean(t.mismatch_kl_BL.to(at::kDouble), mask)};
  for (auto& v : values) v = v.detach().to(at::kDouble).reshape({});
  at::Tensor host = at::stack(values).cpu();
  const double* h = host.data_ptr<double>();
  PolicyLoss out;
  out.loss = total;
  PolicyLossMetrics& m = out.metrics;
  m.loss = h[0];
  m.pg_loss = h[1];
  m.kl_loss = h[2];
  m.lb_loss = h[3];
  m.z_loss = h[4];
  m.entropy = h[5];
  m.clip_frac = h[6];
  m.dual_clip_frac = h[7];
  m.approx_kl = h[8];
  m.ratio_mean = h[9];
  m.ratio_max = h[10];
  m.behav_weight_mean = h[11];
  m.behav_capped_frac = h[12];
  m.num_tokens = h[13];
  m.mismatch_abs = h[14];
  m.mismatch_kl = h[15];
  return out;
}

}  // namespace moerl::rl
