// Global-batch loss aggregation (token-mean, seq-mean-token-mean, seq-mean-token-sum-norm).
#include "rl/aggregation.h"

#include "base/check.h"

namespace moerl::rl {

LossNorm LossNorm::from_mask(const at::Tensor& mask_BL, int64_t max_len) {
  MOERL_CHECK_EQ(mask_BL.dim(), 2) << "mask must be [B, L]";
  at::Tensor m = mask_BL.to(at::kDouble);
  LossNorm n;
  n.num_tokens = m.sum().item<double>();
  n.num_seqs = (m.sum(1) > 0).sum().item<double>();
  n.max_len = static_cast<double>(max_len > 0 ? max_len : mask_BL.size(1));
  return n;
}

LossNorm LossNorm::operator+(const LossNorm& o) const {
  MOERL_CHECK_EQ(max_len, o.max_len) << "partial LossNorms disagree on L_max";
  return LossNorm{num_tokens + o.num_tokens, num_seqs + o.num_seqs, max_len};
}

void check_same_shape(const at::Tensor& x, const at::Tensor& mask_BL, const char* name) {
  MOERL_CHECK(x.defined()) << name << " is required";
  MOERL_CHECK(x.sizes() == mask_BL.sizes())
      << name << " has shape " << x.sizes() << " but the mask is " << mask_BL.sizes();
}

at::Tensor aggregate(const at::Tensor& x_BL, const at::Tensor& mask_BL, LossAgg mode,
                     const LossNorm& norm) {
  check_same_shape(x_BL, mask_BL, "aggregated values");
  at::Tensor m = mask_BL.to(x_BL.scalar_type());
  // NOTE: where(), not x * m: a NaN/inf in padding must not reach the loss (NaN * 0 = NaN).
  at::Tensor xm = at::where(mask_BL.to(at::kBool), x_BL, at::zeros_like(x_BL));
  switch (mode) {
    case LossAgg::kTokenMean:
      MOERL_CHECK_GT(norm.num_tokens, 0) << "token-mean needs the global token count";
      return xm.sum() / norm.num_tokens;
    case LossAgg::kSeqMeanTokenMean: {
      MOERL_CHECK_GT(norm.num_seqs, 0) << "seq-mean-token-mean needs the global sequence count";
      at::Tensor n_B = m.sum(1).clamp_min(1);
      return (xm.sum(1) / n_B).sum() / norm.num_seqs;
    }
    case LossAgg::kSeqMeanTokenSumNorm:
      MOERL_CHECK_GT(norm.num_seqs, 0) << "seq-mean-token-sum-norm needs the global sequence count";
      MOERL_CHECK_GT(norm.max_len, 0) << "seq-mean-token-sum-norm needs L_max";
      return xm.sum() / (norm.num_seqs * norm.max_len);
  }
  MOERL_CHECK(false) << "unknown LossAgg";
  return {};
}

at::Tensor masked_mean(const at::Tensor& x, const at::Tensor& mask) {
  at::Tensor m = mask.to(x.scalar_type());
  return at::where(mask.to(at::kBool), x, at::zeros_like(x)).sum() / m.sum().clamp_min(1);
}

}  // namespace moerl::rl
