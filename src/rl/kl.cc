// KL estimators k1/k2/k3 and folding a KL penalty into rewards.
#include "rl/kl.h"

#include "base/check.h"

namespace moerl::rl {

at::Tensor kl_penalty(const at::Tensor& logp, const at::Tensor& ref_logp, KlEstimator estimator) {
  MOERL_CHECK(logp.sizes() == ref_logp.sizes()) << logp.sizes() << " vs " << ref_logp.sizes();
  at::Tensor x = logp - ref_logp.detach();
  switch (estimator) {
    case KlEstimator::kK1:
      return x;
    case KlEstimator::kK2:
      return 0.5 * x * x;
    case KlEstimator::kK3:
      // NOTE: clamp x before exp so that a huge negative x cannot overflow to inf.
      x = x.clamp(-20.0, 20.0);
      return (at::exp(-x) - 1.0 + x).clamp(-kK3Clamp, kK3Clamp);
    case KlEstimator::kK3Plus: {
      // Straight-through: the value of k3 (unbiased, >= 0), the gradient of k2 (x * grad logp,
      // whose expectation under pi_theta is the gradient of KL(pi_theta || pi_ref)).
      at::Tensor k2 = 0.5 * x * x;
      return kl_penalty(logp.detach(), ref_logp, KlEstimator::kK3) + (k2 - k2.detach());
    }
  }
  MOERL_CHECK(false) << "unknown KlEstimator";
  return {};
}

at::Tensor fold_kl_into_rewards(const at::Tensor& rewards_BL, const at::Tensor& kl_BL,
                                const at::Tensor& mask_BL, double coef) {
  MOERL_CHECK(rewards_BL.sizes() == kl_BL.sizes()) << rewards_BL.sizes() << " vs " << kl_BL.sizes();
  MOERL_CHECK(mask_BL.sizes() == kl_BL.sizes()) << mask_BL.sizes() << " vs " << kl_BL.sizes();
  return rewards_BL - coef * kl_BL.detach().to(rewards_BL.scalar_type()) *
                          mask_BL.to(rewards_BL.scalar_type());
}

at::Tensor fold_kl_into_outcome(const at::Tensor& outcome_B, const at::Tensor& kl_BL,
                                const at::Tensor& mask_BL, double coef) {
  MOERL_CHECK(mask_BL.sizes() == kl_BL.sizes()) << mask_BL.sizes() << " vs " << kl_BL.sizes();
  MOERL_CHECK_EQ(outcome_B.size(0), kl_BL.size(0));
  at::Tensor kl_sum = (kl_BL.detach() * mask_BL.to(kl_BL.scalar_type())).sum(1);
  return outcome_B - coef * kl_sum.to(outcome_B.scalar_type());
}

}  // namespace moerl::rl
