// Entropy from logits, MoE load-balancing loss and router z-loss.
#include "rl/aux_losses.h"

#include "base/check.h"

namespace moerl::rl {

at::Tensor token_entropy(const at::Tensor& logits) {
  MOERL_CHECK_GE(logits.dim(), 1);
  // NOTE: float32 math even for bf16 logits; entropy of a peaked softmax underflows in bf16.
  at::Tensor logp = at::log_softmax(logits, -1, at::kFloat);
  return -(logp.exp() * logp).sum(-1);
}

namespace {

at::Tensor mask_weights(const at::Tensor& mask_T, int64_t num_tokens, const at::Tensor& like) {
  if (!mask_T.defined()) return at::ones({num_tokens}, like.options());
  MOERL_CHECK_EQ(mask_T.dim(), 1);
  MOERL_CHECK_EQ(mask_T.size(0), num_tokens) << "token mask length vs router tokens";
  return mask_T.to(like.options());
}

}  // namespace

at::Tensor load_balancing_loss(const at::Tensor& logits_TE, const at::Tensor& idx_TK,
                               int64_t num_experts, const at::Tensor& mask_T) {
  MOERL_CHECK_EQ(logits_TE.dim(), 2) << "router logits must be [T, E]";
  MOERL_CHECK_EQ(idx_TK.dim(), 2) << "top-k indices must be [T, K]";
  MOERL_CHECK_EQ(logits_TE.size(1), num_experts);
  MOERL_CHECK_EQ(idx_TK.size(0), logits_TE.size(0));
  int64_t tokens = logits_TE.size(0), k = idx_TK.size(1);
  at::Tensor w_T = mask_weights(mask_T, tokens, logits_TE.to(at::kFloat));
  at::Tensor n = w_T.sum().clamp_min(1);
  at::Tensor p_TE = at::softmax(logits_TE.to(at::kFloat), -1);
  at::Tensor prob_E = (p_TE * w_T.unsqueeze(1)).sum(0) / n;
  at::Tensor counts_E = at::zeros({num_experts}, w_T.options());
  counts_E.index_add_(0, idx_TK.reshape({-1}).to(at::kLong),
                      w_T.unsqueeze(1).expand({tokens, k}).reshape({-1}));
  at::Tensor frac_E = counts_E / (n * static_cast<double>(k));
  return static_cast<double>(num_experts) * (frac_E * prob_E).sum();
}

at::Tensor load_balancing_loss(const std::vector<at::Tensor>& logits, const std::vector<at::Tensor>& idx,
                               int64_t num_experts, const at::Tensor& mask_T) {
  MOERL_CHECK(!logits.empty()) << "no router layers";
  MOERL_CHECK_EQ(logits.size(), idx.size()) << "router logits and top-k indices per layer";
  at::Tensor total;
  for (size_t l = 0; l < logits.size(); ++l) {
    at::Tensor v = load_balancing_loss(logits[l], idx[l], num_experts, mask_T);
    total = total.defined() ? total + v : v;
  }
  return total / static_cast<double>(logits.size());
}

at::Tensor router_z_loss(const at::Tensor& logits_TE, const at::Tensor& mask_T) {
  MOERL_CHECK_EQ(logits_TE.dim(), 2) << "router logits must be [T, E]";
  at::Tensor z_T = at::logsumexp(logits_TE.to(at::kFloat), {1});
  at::Tensor w_T = mask_weights(mask_T, logits_TE.size(0), z_T);
  return (z_T * z_T * w_T).sum() / w_T.sum().clamp_min(1);
}

at::Tensor router_z_loss(const std::vector<at::Tensor>& logits, const at::Tensor& mask_T) {
  MOERL_CHECK(!logits.empty()) << "no router layers";
  at::Tensor total;
  for (const auto& l : logits) {
    at::Tensor v = router_z_loss(l, mask_T);
    total = total.defined() ? total + v : v;
  }
  return total / static_cast<double>(logits.size());
}

}  // namespace moerl::rl
