// Regularisers that are not policy-gradient terms: per-token entropy from logits, the
// MoE load-balancing loss (Switch / Megatron form) and the router z-loss (ST-MoE).
// Tensor legend: B sequences, L tokens, V vocabulary, T routed tokens, E experts, K top-k.
//
//   at::Tensor ent_BL = token_entropy(logits_BLV);          // differentiable
//   at::Tensor lb = load_balancing_loss(router_logits_TE, topk_idx_TK, num_experts);
//   at::Tensor z = router_z_loss(router_logits_TE);
// Pure functions; shape errors are MOERL_CHECK failures.
#pragma once

#include <vector>

#include <ATen/ATen.h>

namespace moerl::rl {

// H_t = logsumexp(z_t) - sum_v softmax(z_t)_v * z_tv over the last dim: [..., V] -> [...].
at::Tensor token_entropy(const at::Tensor& logits);

// Per layer l, with p = softmax(router_logits) [T, E] and top-k selections idx [T, K]:
//   f_e = (# of (t, k) with idx[t, k] = e) / (T * K)      (fraction of routed assignments)
//   P_e = mean_t p[t, e]
//   loss_l = E * sum_e f_e * P_e                          (= 1 for perfectly uniform routing)
// Returns the mean over layers. Only P carries gradient. token_mask_T (optional, 0/1)
// excludes padding tokens from both f and P. (HF Mixtral normalises f by T only, which
// is K times this value.)
at::Tensor load_balancing_loss(const std::vector<at::Tensor>& router_logits_TE,
                               const std::vector<at::Tensor>& topk_idx_TK, int64_t num_experts,
                               const at::Tensor& token_mask_T = {});
at::Tensor load_balancing_loss(const at::Tensor& router_logits_TE, const at::Tensor& topk_idx_TK,
                               int64_t num_experts, const at::Tensor& token_mask_T = {});

// mean_t (logsumexp_e router_logits[t, e])^2, averaged over layers; masked like above.
at::Tensor router_z_loss(const std::vector<at::Tensor>& router_logits_TE,
                         const at::Tensor& token_mask_T = {});
at::Tensor router_z_loss(const at::Tensor& router_logits_TE, const at::Tensor& token_mask_T = {});

}  // namespace moerl::rl
