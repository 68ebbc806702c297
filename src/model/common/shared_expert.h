// Shared experts: a dense SwiGLU MLP every token passes through beside the routed experts.
// DeepSeek-V3 adds it as is (`mlp.shared_experts`, n_shared_experts of them fused into one
// MLP of width moe_intermediate_size * n); Qwen2-MoE scales it per token by
// sigmoid(x @ shared_expert_gate^T) (`mlp.shared_expert`, `mlp.shared_expert_gate` [1,H]).
// Under expert parallelism it is replicated on every rank, like attention.
//
//   SharedExpertWeights s{{gate, up, down}, gate_1H};   // gate_1H undefined = ungated
//   y_TH = routed_TH + shared_expert(s, x_TH);
#pragma once

#include <ATen/ATen.h>

#include "model/common/layers.h"

namespace moerl::model {

struct SharedExpertWeights {
  ExpertWeights mlp;   // undefined tensors = the layer has no shared expert
  at::Tensor gate_1H;  // Qwen2-MoE's sigmoid gate; undefined = added ungated

  bool defined() const { return mlp.gate_IH.defined(); }
};

// [T,H] -> [T,H]: swiglu(x) (* sigmoid(x @ gate^T) when gated). Differentiable.
at::Tensor shared_expert(const SharedExpertWeights& w, const at::Tensor& x_TH);

}  // namespace moerl::model
