// Stateless building blocks shared by every architecture: RMSNorm, SwiGLU MLP, and the
// rotary embeddings of rope.h (included here). Pure functions of tensors; all are
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

#include "model/common/rope.h"

namespace moerl::model {

// y = w * x / sqrt(mean(x^2) + eps), the mean taken in at least float32 precision (on CUDA
// with libtorch >= 2.9, one fused kernel each way: at::rms_norm).
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// One SwiGLU MLP's weights (a dense layer's MLP, a routed or a shared expert).
struct ExpertWeights {
  at::Tensor gate_IH, up_IH, down_HI;  // SwiGLU, nn.Linear layout
};

// down(silu(gate(x)) * up(x)); weights in nn.Linear layout ([out,in]).
at::Tensor swiglu(const at::Tensor& x, const at::Tensor& gate_IH, const at::Tensor& up_IH,
                  const at::Tensor& down_HI);

}  // namespace moerl::model
