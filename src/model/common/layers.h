// Stateless building blocks shared by every architecture: RMSNorm, rotary embeddings
// (rotate-half convention, as Hugging Face), SwiGLU MLP. Pure functions of tensors; all are
// differentiable and run on whatever device/dtype their inputs have.
//
// Legend: B batch, T query tokens, H hidden, D head dim, I intermediate width.
//
//   at::Tensor y = rms_norm(x_BTH, w_H, 1e-6);
//   auto [cos, sin] = rope_cos_sin(pos_BT, D, 1e4, at::kFloat);   // [B,T,D] each
//   q_BhTD = apply_rope(q_BhTD, cos, sin);
#pragma once

#include <ATen/ATen.h>

#include <utility>

namespace moerl::model {

// y = w * x / sqrt(mean(x^2) + eps), the mean taken in at least float32 precision.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// cos/sin tables [B,T,D] for integer positions [B,T]: freq_j = theta^(-2j/D), the D/2
// frequencies repeated twice (HF's cat(freqs, freqs)). Computed in float32 (or float64 when
// `dtype` is double), then cast to `dtype`.
std::pair<at::Tensor, at::Tensor> rope_cos_sin(const at::Tensor& position_ids_BT, int64_t head_dim,
                                               double theta, at::ScalarType dtype);

// x * cos + rotate_half(x) * sin for x [B,heads,T,D] and cos/sin [B,T,D].
at::Tensor apply_rope(const at::Tensor& x_BhTD, const at::Tensor& cos_BTD, const at::Tensor& sin_BTD);

// down(silu(gate(x)) * up(x)); weights in nn.Linear layout ([out,in]).
at::Tensor swiglu(const at::Tensor& x, const at::Tensor& gate_IH, const at::Tensor& up_IH,
                  const at::Tensor& down_HI);

}  // namespace moerl::model
