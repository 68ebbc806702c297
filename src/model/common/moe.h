// Mixture-of-experts block: top-k softmax router, then tokens travel through an ep::Group
// (dispatch -> this rank's SwiGLU experts -> combine), differentiably. On one rank the group
// is the loopback group; with R ranks this block holds experts [rank*E/R, (rank+1)*E/R).
//
// Legend: T tokens (B*T flattened), H hidden, E global experts, K top-k, N received rows.
//
//   MoeWeights w{router_EH, experts};                 // experts: this rank's, in order
//   MoeOutput o = moe_forward(w, x_TH, {E, K, norm_topk_prob}, group);
//   o.y_TH; o.router_logits_TE; o.topk_idx_TK; o.expert_load_E;
//
// Collective when the group spans ranks: every rank must call it for every MoE layer.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "ep/ep.h"

namespace moerl::model {

struct ExpertWeights {
  at::Tensor gate_IH, up_IH, down_HI;  // SwiGLU, nn.Linear layout
};

struct MoeWeights {
  at::Tensor router_EH;                // all E experts' router rows
  std::vector<ExpertWeights> experts;  // local experts, ids first_expert.. in order
};

struct RouterConfig {
  int64_t num_experts = 0;
  int64_t top_k = 0;
  bool norm_topk_prob = true;  // renormalise the top-k probabilities to sum to 1
};

struct MoeOutput {
  at::Tensor y_TH;
  at::Tensor router_logits_TE;  // pre-softmax, model dtype (for aux / z losses)
  at::Tensor topk_idx_TK;       // int64 global expert ids
  at::Tensor topk_weight_TK;    // combine weights (after renormalisation), model dtype
  at::Tensor expert_load_E;     // int64 tokens routed to each expert by this rank
};

// softmax(router logits) in float32 (float64 for double models), top-k, optional renorm.
void route(const at::Tensor& router_logits_TE, const RouterConfig& cfg, at::Tensor* topk_idx_TK,
           at::Tensor* topk_weight_TK);

// The local experts applied to dispatched rows: out_n = sum_k w_nk * expert_{idx_nk}(x_n),
// entries with idx -1 skipped.
at::Tensor run_local_experts(const std::vector<ExpertWeights>& experts, const at::Tensor& x_NH,
                             const at::Tensor& topk_idx_NK, const at::Tensor& topk_weight_NK);

// GPU hook (model/cuda's install_cuda_experts() sets it): run_local_experts hands CUDA
// inputs to it first; an undefined result means "not handled" and the generic loop runs.
using LocalExpertsHook = at::Tensor (*)(const std::vector<ExpertWeights>& experts, const at::Tensor& x_NH,
                                        const at::Tensor& topk_idx_NK, const at::Tensor& topk_weight_NK);
void set_local_experts_hook(LocalExpertsHook hook);

MoeOutput moe_forward(const MoeWeights& w, const at::Tensor& x_TH, const RouterConfig& cfg,
                      ep::Group& group);

}  // namespace moerl::model
