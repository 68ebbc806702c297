// RMSNorm and SwiGLU. Matches Hugging Face's Qwen3-MoE / Mixtral math in float32.
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

at::Tensor swiglu(const at::Tensor& x, const at::Tensor& gate_IH, const at::Tensor& up_IH,
                  const at::Tensor& down_HI) {
  at::Tensor h = at::silu(at::linear(x, gate_IH)) * at::linear(x, up_IH);
  return at::linear(h, down_HI);
}

}  // namespace moerl::model
