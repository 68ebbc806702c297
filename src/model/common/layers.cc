// RMSNorm and SwiGLU. Matches Hugging Face's Qwen3-MoE / Mixtral math in float32.
#include "model/common/layers.h"

#include <torch/version.h>

// libtorch >= 2.9 runs at::rms_norm on CUDA as one fused kernel, forward and backward
// (aten::_fused_rms_norm and its backward); earlier ones compose it from the same ops as here.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 9)
#define MOERL_HAS_FUSED_RMS_NORM 1
#else
#define MOERL_HAS_FUSED_RMS_NORM 0
#endif

namespace moerl::model {

namespace {
// Accumulation dtype: at least float32 (HF upcasts bf16/f16 norms and RoPE), double stays.
at::ScalarType compute_type(at::ScalarType t) {
  return t == at::kDouble ? at::kDouble : at::kFloat;
}
}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
#if MOERL_HAS_FUSED_RMS_NORM
  // One read and one write of x instead of about nine float32 passes (and a dozen in the
  // backward, with float32 copies of x saved for it). The weight product is rounded once,
  // not twice as below: at most one bf16 ulp apart; the CUDA-graph decode step uses it too.
  if (x.is_cuda()) return at::rms_norm(x, {x.size(-1)}, weight, eps);
#endif
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
