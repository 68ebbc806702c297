// RMSNorm, RoPE and SwiGLU. Matches Hugging Face's Qwen3-MoE / Mixtral math in float32.
#include "model/common/layers.h"

namespace moerl::model {

namespace {
// Accumulation dtype: at least float32 (HF upcasts bf16/f16 norms and RoPE), double stays.
at::ScalarType compute_type(at::ScalarType t) {
  return t == at::kDouble ? at::kDouble : at::kFloat;
}
}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const at::ScalarType in_type = x.scalar_type();
  at::Tensor xf = x.to(compute_type(in_type));
  at::Tensor var = xf.pow(2).mean({-1}, /*keepdim=*/true);
  at::Tensor normed = (xf * at::rsqrt(var + eps)).to(in_type);
  return weight * normed;
}

std::pair<at::Tensor, at::Tensor> rope_cos_sin(const at::Tensor& position_ids_BT, int64_t head_dim,
                                               double theta, at::ScalarType dtype) {
  const at::ScalarType ct = compute_type(dtype);
  auto opts = at::TensorOptions().dtype(ct).device(position_ids_BT.device());
  // inv_freq_j = 1 / theta^(2j/D), computed as HF does: arange(0, D, 2) / D.
  at::Tensor exponent = at::arange(0, head_dim, 2, opts.dtype(at::kLong)).to(ct) / static_cast<double>(head_dim);
  at::Tensor inv_freq = 1.0 / at::pow(theta, exponent);                   // [D/2]
  at::Tensor freqs = position_ids_BT.to(ct).unsqueeze(-1) * inv_freq;     // [B,T,D/2]
  at::Tensor emb = at::cat({freqs, freqs}, -1);                           // [B,T,D]
  return {emb.cos().to(dtype), emb.sin().to(dtype)};
}

at::Tensor apply_rope(const at::Tensor& x_BhTD, const at::Tensor& cos_BTD, const at::Tensor& sin_BTD) {
  const int64_t half = x_BhTD.size(-1) / 2;
  at::Tensor x1 = x_BhTD.narrow(-1, 0, half);
  at::Tensor x2 = x_BhTD.narrow(-1, half, half);
  at::Tensor rotated = at::cat({-x2, x1}, -1);
  at::Tensor c = cos_BTD.unsqueeze(1);
  at::Tensor s = sin_BTD.unsqueeze(1);
  return x_BhTD * c + rotated * s;
}

at::Tensor swiglu(const at::Tensor& x, const at::Tensor& gate_IH, const at::Tensor& up_IH,
                  const at::Tensor& down_HI) {
  at::Tensor h = at::silu(at::linear(x, gate_IH)) * at::linear(x, up_IH);
  return at::linear(h, down_HI);
}

}  // namespace moerl::model
