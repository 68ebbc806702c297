// The MoE router in two steps that callers may separate: (a) selection, the top-k expert
// ids from the scores (+ a selection-only bias, within the best groups), and (b) the gate
// weights, computed from the live router logits gathered at the selected ids. Routing
// replay passes a recorded selection and runs (b) only, so the gate weights (and their
// gradient into the router) come from the current router even where the ids disagree.
//
// Legend: T tokens, E experts, G expert groups, K top-k.
//
//   softmax (Qwen, Mixtral):   p = softmax(logits); ids = topk(p); w = p[ids] (/ sum iff norm)
//   sigmoid (DeepSeek-V3):     s = sigmoid(logits); ids = topk over the best topk_groups groups
//                              of s + bias (group score = sum of its top-2); w = s[ids]
//                              (/ (sum + 1e-20) iff norm) * routed_scaling_factor
//
//   route(logits_TE, cfg, &idx_TK, &w_TK);                               // select + weigh
//   route(logits_TE, cfg, &idx_TK, &w_TK, bias_E, recorded_idx_TK);      // weigh these ids
//
// Scores are computed in float32 (float64 for double logits). Pure functions, thread-safe.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace moerl::model {

enum class RouterScoring {
  kSoftmax,  // probabilities over all experts
  kSigmoid,  // independent per-expert scores
};

// Dtype of the router's matrix product: the model's, or float32 inputs and weights
// (DeepSeek-V3 routes in float32 whatever the model dtype).
enum class RouterPrecision { kModel, kFloat32 };

struct RouterConfig {
  int64_t num_experts = 0;
  int64_t top_k = 0;
  bool norm_topk_prob = true;  // renormalise the selected weights to sum to 1
  RouterScoring scoring = RouterScoring::kSoftmax;
  // Group-limited top-k: experts form num_groups equal groups; only the topk_groups groups
  // with the largest sum of their two best (biased) scores compete. 1 = no groups.
  int64_t num_groups = 1;
  int64_t topk_groups = 1;
  double routed_scaling_factor = 1.0;  // multiplies the gate weights
  RouterPrecision logits_precision = RouterPrecision::kModel;
};

// softmax or sigmoid of the logits, float32 (float64 for double logits) [T,E].
at::Tensor router_scores(const at::Tensor& router_logits_TE, const RouterConfig& cfg);

// Step (a): int64 [T,K] ids, descending by (biased) score. `score_bias_E` (optional) is
// added for the choice only.
at::Tensor select_experts(const at::Tensor& scores_TE, const RouterConfig& cfg, const at::Tensor& score_bias_E);

// Step (b): [T,K] gate weights of `topk_idx_TK` from the unbiased scores, float32/float64.
at::Tensor gate_weights(const at::Tensor& scores_TE, const at::Tensor& topk_idx_TK, const RouterConfig& cfg);

// Both steps. With `forced_topk_idx_TK` (int64 [T,K], ids in [0,E)) defined, those ids are
// used as they are (no selection); a token whose row holds a -1 (no record) is selected live. Weights are returned in the logits' dtype.
// Error (naming the shape/values) when the forced ids do not fit [T,K] and [0,E).
void route(const at::Tensor& router_logits_TE, const RouterConfig& cfg, at::Tensor* topk_idx_TK,
           at::Tensor* topk_weight_TK, const at::Tensor& score_bias_E = {},
           const at::Tensor& forced_topk_idx_TK = {});

}  // namespace moerl::model
