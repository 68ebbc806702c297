// Group-relative advantages (GRPO, Dr.GRPO, RLOO), token broadcast, GAE and whitening.
#include "rl/advantages.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "rl/kl.h"
#include "rl/reward_shaping.h"

namespace moerl::rl {

at::Tensor group_advantages(const at::Tensor& rewards_NG, AdvEstimator estimator, double eps) {
  MOERL_CHECK_EQ(rewards_NG.dim(), 2) << "rewards must be [num_groups, G]";
  MOERL_CHECK(estimator != AdvEstimator::kGae) << "GAE needs values; call gae()";
  at::Tensor r = rewards_NG.to(at::kDouble);
  int64_t g = r.size(1);
  if (g <= 1) return at::zeros_like(rewards_NG);
  at::Tensor mean = r.mean(1, /*keepdim=*/true);
  at::Tensor a;
  switch (estimator) {
    case AdvEstimator::kGrpo:
      a = (r - mean) / (r.std(1, /*unbiased=*/true, /*keepdim=*/true) + eps);
      break;
    case AdvEstimator::kDrGrpo:
      a = r - mean;
      break;
    case AdvEstimator::kRloo: {
      at::Tensor others = (r.sum(1, true) - r) / static_cast<double>(g - 1);
      a = r - others;
      break;
    }
    case AdvEstimator::kGae:
      break;
  }
  return a.to(rewards_NG.scalar_type());
}

at::Tensor broadcast_to_tokens(const at::Tensor& adv_B, const at::Tensor& mask_BL) {
  MOERL_CHECK_EQ(adv_B.dim(), 1);
  MOERL_CHECK_EQ(mask_BL.dim(), 2);
  MOERL_CHECK_EQ(adv_B.size(0), mask_BL.size(0));
  return adv_B.unsqueeze(1) * mask_BL.to(adv_B.scalar_type());
}

at::Tensor token_rewards(const at::Tensor& outcome_B, const at::Tensor& mask_BL) {
  MOERL_CHECK_EQ(outcome_B.dim(), 1);
  MOERL_CHECK_EQ(mask_BL.dim(), 2);
  MOERL_CHECK_EQ(outcome_B.size(0), mask_BL.size(0));
  int64_t len = mask_BL.size(1);
  at::Tensor valid = mask_BL.to(at::kBool);
  // Index of the last valid token: argmax of position * valid (ties impossible past 0).
  at::Tensor pos = at::arange(len, mask_BL.options().dtype(at::kLong)).unsqueeze(0);
  at::Tensor last_B = (pos * valid.to(at::kLong)).argmax(1);
  at::Tensor has_B = valid.any(1);
  at::Tensor out = at::zeros(mask_BL.sizes(), outcome_B.options());
  at::Tensor vals = outcome_B * has_B.to(outcome_B.scalar_type());
  out.scatter_(1, last_B.unsqueeze(1), vals.unsqueeze(1));
  return out;
}

Gae gae(const at::Tensor& rewards_BL, const at::Tensor& values_BL, const at::Tensor& mask_BL,
        double gamma, double lambda) {
  MOERL_CHECK_EQ(mask_BL.dim(), 2);
  MOERL_CHECK(rewards_BL.sizes() == mask_BL.sizes()) << rewards_BL.sizes() << " vs " << mask_BL.sizes();
  MOERL_CHECK(values_BL.sizes() == mask_BL.sizes()) << values_BL.sizes() << " vs " << mask_BL.sizes();
  at::NoGradGuard no_grad;
  at::Tensor r = rewards_BL.to(at::kDouble), v = values_BL.detach().to(at::kDouble);
  at::Tensor m = mask_BL.to(at::kBool);
  int64_t batch = mask_BL.size(0), len = mask_BL.size(1);
  at::Tensor adv = at::zeros({batch, len}, r.options());
  at::Tensor next_v = at::zeros({batch}, r.options());
  at::Tensor next_a = at::zeros({batch}, r.options());
  for (int64_t t = len - 1; t >= 0; --t) {
    at::Tensor mt = m.select(1, t);
    at::Tensor vt = v.select(1, t);
    at::Tensor delta = r.select(1, t) + gamma * next_v - vt;
    at::Tensor a = delta + gamma * lambda * next_a;
    adv.select(1, t).copy_(at::where(mt, a, at::zeros_like(a)));
    next_a = at::where(mt, a, next_a);
    next_v = at::where(mt, vt, next_v);
  }
  at::Tensor ret = (adv + v) * m.to(at::kDouble);
  return Gae{adv.to(rewards_BL.scalar_type()), ret.to(rewards_BL.scalar_type())};
}

at::Tensor whiten(const at::Tensor& x_BL, const at::Tensor& mask_BL, const SumOverRanks& sum_over_ranks) {
  MOERL_CHECK(x_BL.sizes() == mask_BL.sizes()) << x_BL.sizes() << " vs " << mask_BL.sizes();
  at::Tensor x = x_BL.to(at::kDouble), m = mask_BL.to(at::kDouble);
  if (!sum_over_ranks) {
    at::Tensor n = m.sum().clamp_min(1);
    at::Tensor mean = (x * m).sum() / n;
    at::Tensor var = ((x - mean).pow(2) * m).sum() / n;
    return ((x - mean) / (var.sqrt() + 1e-8) * m).to(x_BL.scalar_type());
  }
  std::vector<double> s = sum_over_ranks({(x * m).sum().item<double>(), m.sum().item<double>()});
  const double n = std::max(1.0, s[1]), mean = s[0] / n;
  const double var = sum_over_ranks({((x - mean).pow(2) * m).sum().item<double>()})[0] / n;
  return ((x - mean) / (std::sqrt(var) + 1e-8) * m).to(x_BL.scalar_type());
}

Advantages compute_advantages(const AdvantageInputs& in, const LossConfig& cfg) {
  MOERL_CHECK(in.rewards_B.defined() && in.rewards_B.dim() == 1) << "rewards_B must be [B]";
  MOERL_CHECK(in.mask_BL.defined() && in.mask_BL.dim() == 2) << "mask_BL must be [B, L]";
  MOERL_CHECK_EQ(in.rewards_B.size(0), in.mask_BL.size(0));
  at::NoGradGuard no_grad;
  bool kl_reward = cfg.kl_in == KlPlacement::kReward && cfg.kl_coef > 0;
  MOERL_CHECK(!kl_reward || in.kl_BL.defined()) << "kl_in = reward needs kl_BL";
  at::Tensor rewards = in.rewards_B.is_floating_point() ? in.rewards_B : in.rewards_B.to(at::kFloat);
  if (cfg.overlong_buffer > 0) {
    MOERL_CHECK_GT(in.max_new_tokens, 0) << "overlong_buffer needs max_new_tokens";
    const int64_t buffer = std::min(cfg.overlong_buffer, in.max_new_tokens);
    at::Tensor lengths = in.mask_BL.sum(1);
    rewards = rewards + overlong_penalty(lengths, in.max_new_tokens, buffer).to(rewards.scalar_type());
  }
  Advantages out;
  if (cfg.adv_estimator == AdvEstimator::kGae) {
    MOERL_CHECK(in.values_BL.defined()) << "adv_estimator = gae needs values_BL";
    at::Tensor r = token_rewards(rewards, in.mask_BL);
    if (kl_reward) r = fold_kl_into_rewards(r, in.kl_BL, in.mask_BL, cfg.kl_coef);
    Gae g = gae(r, in.values_BL * in.mask_BL.to(in.values_BL.scalar_type()), in.mask_BL, cfg.gamma, cfg.lambda);
    out.advantages_BL =
        cfg.whiten_advantages ? whiten(g.advantages_BL, in.mask_BL, in.sum_over_ranks) : g.advantages_BL;
    out.returns_BL = g.returns_BL;
    return out;
  }
  const int64_t batch = in.rewards_B.size(0), g = in.group_size > 0 ? in.group_size : cfg.group_size;
  MOERL_CHECK(g > 0 && batch % g == 0) << "batch of " << batch << " responses is not whole groups of " << g;
  at::Tensor r = rewards;
  if (kl_reward) r = fold_kl_into_outcome(r, in.kl_BL, in.mask_BL, cfg.kl_coef);
  at::Tensor adv = group_advantages(r.reshape({batch / g, g}), cfg.adv_estimator, cfg.adv_eps);
  out.advantages_BL = broadcast_to_tokens(adv.reshape({-1}), in.mask_BL);
  return out;
}

}  // namespace moerl::rl
