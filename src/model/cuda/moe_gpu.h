// The MoE experts and block on the GPU: tokens sorted by expert on the device (no host
// sync), one grouped matrix product per projection over all local experts (at::_grouped_mm
// in torch >= 2.8, bf16 with fp32 accumulation; else a per-expert loop), fused SwiGLU, and
// the ep/cuda pack/combine kernels; every step differentiable (custom autograd).
//
//   model::cuda::install_cuda_experts();          // run_local_experts uses this for CUDA bf16
//   auto o = model::cuda::moe_block({router_EH, w13_E2IH, w2_EHI}, x_TH, {E, K, true});
//   o.y_TH.sum().backward();
//
// Legend: T tokens, H hidden, I expert intermediate, E experts, K top-k, M = T*K rows.
// Thread-safety: as at:: ops (expert_stacks' cache is not thread-safe).
// Failure: non-CUDA inputs or shape mismatches throw moerl::Error.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "model/common/moe.h"

namespace moerl::model::cuda {

// Where each (token, k) entry goes once the entries are sorted by expert.
struct ExpertSort {
  at::Tensor order;      // [M] int64 flat entry (t*K+k) of each sorted row
  at::Tensor src_token;  // [M] int64 source token of each sorted row
  at::Tensor pos_TK;     // [T,K] int64 sorted row of each entry, -1 where idx is -1
  at::Tensor offs;       // [E] int32 end row of each expert's group (cumulative)
};
ExpertSort sort_by_expert(const at::Tensor& topk_idx_TK, int64_t num_experts);

// True when this libtorch has at::_grouped_mm (one launch per projection).
bool has_grouped_mm();
// y[rows of group e] = x[rows of group e] @ w[e]^T, w in nn.Linear layout [E,N,K_in].
at::Tensor grouped_linear(const at::Tensor& x_MK, const at::Tensor& w_ENK, const at::Tensor& offs);
// h = silu(gu[:, :I]) * gu[:, I:] (fused kernel, differentiable).
at::Tensor swiglu(const at::Tensor& gu_M2I);

// out_n = sum_k w_nk * expert_{idx_nk}(x_n), idx -1 skipped; w13 [E,2I,H] = [gate; up], w2
// [E,H,I]. Differentiable in x, w, w13, w2. Without autograd and with few rows per expert
// (decode; model/cuda/expert_gemm.h) the products run expert_gemm when switched on
// (model/cuda/decode_kernels.h), else at::_grouped_mm.
at::Tensor grouped_experts(const at::Tensor& x_NH, const at::Tensor& topk_idx_NK, const at::Tensor& topk_w_NK,
                           const at::Tensor& w13_E2IH, const at::Tensor& w2_EHI);

struct MoeBlockWeights {
  at::Tensor router_EH, w13_E2IH, w2_EHI;
};
// Router (model::route with cfg's scoring and groups, no selection bias) + grouped_experts:
// the routed half of an MoE layer (benchmarks, tests). Models run model::moe_forward, which
// reaches grouped_experts through the install_cuda_experts hook and adds the shared expert.
MoeOutput moe_block(const MoeBlockWeights& w, const at::Tensor& x_TH, const RouterConfig& cfg);

// The (w13, w2) grouped_experts reads for one layer's experts: the packed tensors when the
// experts are held packed (model/common/expert_pack.h; in grad mode differentiable, their
// gradients added into one packed buffer the per-expert grads alias: expert_grad.h); else in
// grad mode a differentiable stack, otherwise a stacked copy cached by tensor and version
// (an in-place update restacks).
std::pair<at::Tensor, at::Tensor> expert_stacks(const std::vector<ExpertWeights>& experts);

// Registers grouped_experts as model::run_local_experts' path for CUDA bf16 inputs.
void install_cuda_experts();

}  // namespace moerl::model::cuda
