// The local experts of an MoE block as ONE autograd op for CPU float32/float64: the routed
// (token, slot) entries are gathered once in expert order, each expert runs its SwiGLU as
// three gemms on its contiguous slice, and the weighted results are scattered back once.
// The backward pass does the same in reverse with preallocated buffers, instead of the
// generic loop's per-expert autograd graph (one gather, one full-size zero-filled gradient
// and a dozen small ops per expert).
//
//   if (cpu_experts_apply(x_NH)) y_NH = cpu_experts(experts, x_NH, topk_idx_NK, topk_weight_NK);
//
// Same math as run_local_experts' generic loop: y[n] = sum_k w[n,k] * expert_{idx[n,k]}(x[n]),
// slots with idx -1 skipped. Differentiable in x, the weights and every expert matrix.
// Thread-safe (pure function). Failure: MOERL_CHECK on expert ids outside [-1, experts.size()).
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "model/common/moe.h"

namespace moerl::model {

// True when cpu_experts handles x: a CPU tensor of float32 or float64.
bool cpu_experts_apply(const at::Tensor& x_NH);

at::Tensor cpu_experts(const std::vector<ExpertWeights>& experts, const at::Tensor& x_NH,
                       const at::Tensor& topk_idx_NK, const at::Tensor& topk_weight_NK);

}  // namespace moerl::model
