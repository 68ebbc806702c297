// Mixture-of-experts block: router (router.h: softmax or sigmoid scores, optional
// selection bias and expert groups), then tokens travel through an ep::Group (dispatch ->
// this rank's SwiGLU experts -> combine), differentiably, plus an optional shared expert
// (shared_expert.h) computed on every rank. A group of one rank is not called: the local
// experts read x as it is (no host-side layout, no host sync); with R ranks this block holds
// experts [rank*E/R, (rank+1)*E/R).
//
// Legend: T tokens (B*T flattened), H hidden, E global experts, K top-k, N received rows.
//
//   MoeWeights w{router_EH, experts};                 // experts: this rank's, in order
//   MoeOutput o = moe_forward(w, x_TH, {E, K, norm_topk_prob}, group);
//   o.y_TH; o.router_logits_TE; o.topk_idx_TK; o.expert_load_E;
//   moe_forward(w, x_TH, cfg, group, recorded_idx_TK);   // routing replay: these ids
//
// Collective when the group spans ranks: every rank must call it for every MoE layer.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "ep/ep.h"
#include "model/common/layers.h"
#include "model/common/router.h"
#include "model/common/shared_expert.h"

namespace moerl::model {

struct MoeWeights {
  at::Tensor router_EH;                // all E experts' router rows
  std::vector<ExpertWeights> experts;  // local experts, ids first_expert.. in order
  at::Tensor score_bias_E;             // DeepSeek-V3 e_score_correction_bias (a buffer), or undefined
  SharedExpertWeights shared;          // optional
};

struct MoeOutput {
  at::Tensor y_TH;
  at::Tensor router_logits_TE;  // pre-activation, model dtype (float32 for RouterPrecision::kFloat32)
  at::Tensor topk_idx_TK;       // int64 global expert ids
  at::Tensor topk_weight_TK;    // combine weights (after renormalisation / scaling), logits' dtype
  at::Tensor expert_load_E;     // int64 tokens routed to each expert by this rank
};

// The local experts applied to dispatched rows: out_n = sum_k w_nk * expert_{idx_nk}(x_n),
// entries with idx -1 skipped.
at::Tensor run_local_experts(const std::vector<ExpertWeights>& experts, const at::Tensor& x_NH,
                             const at::Tensor& topk_idx_NK, const at::Tensor& topk_weight_NK);

// GPU hook (model/cuda's install_cuda_experts() sets it): run_local_experts hands CUDA
// inputs to it first; an undefined result means "not handled" and the generic loop runs.
using LocalExpertsHook = at::Tensor (*)(const std::vector<ExpertWeights>& experts, const at::Tensor& x_NH,
                                        const at::Tensor& topk_idx_NK, const at::Tensor& topk_weight_NK);
void set_local_experts_hook(LocalExpertsHook hook);

// The router's logits for x (in float32 when cfg.logits_precision says so).
at::Tensor router_logits(const MoeWeights& w, const at::Tensor& x_TH, const RouterConfig& cfg);

// `forced_topk_idx_TK` (int64 [T,K]) defined: route these tokens to those experts and take
// the gate weights from the live router (router.h, step (b) only); undefined: select.
MoeOutput moe_forward(const MoeWeights& w, const at::Tensor& x_TH, const RouterConfig& cfg, ep::Group& group,
                      const at::Tensor& forced_topk_idx_TK = {});

}  // namespace moerl::model
