// Router scoring, group-limited selection and gate weights (see router.h), following
// transformers' Qwen2/3-MoE, Mixtral and DeepseekV3TopkRouter math.
#include "model/common/router.h"

#include <limits>

#include "base/error.h"

namespace moerl::model {

namespace {
at::ScalarType score_type(const at::Tensor& logits) {
  return logits.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

void check_forced(const at::Tensor& idx, const at::Tensor& logits, const RouterConfig& cfg) {
  const int64_t T = logits.size(0);
  if (idx.dim() != 2 || idx.size(0) != T || idx.size(1) != cfg.top_k || idx.scalar_type() != at::kLong) {
    throw Error("forced_topk_idx_TK is " + std::string(c10::toString(idx.scalar_type())) + " " +
                    std::string(c10::str(idx.sizes())) + "; expected int64 [" + std::to_string(T) + ", " +
                    std::to_string(cfg.top_k) + "] (tokens x top-k of this layer)",
                "pass the selection recorded for exactly these tokens and this layer");
  }
  if (idx.numel() == 0) return;
  const int64_t lo = idx.min().item<int64_t>(), hi = idx.max().item<int64_t>();
  if (lo < -1 || hi >= cfg.num_experts) {
    throw Error("forced_topk_idx_TK holds expert ids in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                    "], outside [0, num_experts=" + std::to_string(cfg.num_experts) + ") (-1: route live)",
                "the recorded routing comes from another model, or the record is corrupt");
  }
}
}  // namespace

at::Tensor router_scores(const at::Tensor& router_logits_TE, const RouterConfig& cfg) {
  const at::ScalarType ct = score_type(router_logits_TE);
  if (cfg.scoring == RouterScoring::kSigmoid) return at::sigmoid(router_logits_TE.to(ct));
  return at::softmax(router_logits_TE, -1, ct);
}

at::Tensor select_experts(const at::Tensor& scores_TE, const RouterConfig& cfg, const at::Tensor& score_bias_E) {
  at::NoGradGuard no_grad;  // the choice is not differentiable; step (b) carries the gradient
  at::Tensor choice = score_bias_E.defined() ? scores_TE + score_bias_E.to(scores_TE.scalar_type()) : scores_TE;
  if (cfg.num_groups > 1) {
    const int64_t T = choice.size(0), G = cfg.num_groups, per_group = cfg.num_experts / G;
    at::Tensor group_scores = std::get<0>(choice.view({T, G, per_group}).topk(2, -1)).sum(-1);  // [T,G]
    at::Tensor best = std::get<1>(group_scores.topk(cfg.topk_groups, -1, /*largest=*/true, /*sorted=*/false));
    at::Tensor keep_TG = at::zeros({T, G}, choice.options().dtype(at::kBool)).scatter_(1, best, true);
    at::Tensor keep_TE = keep_TG.unsqueeze(-1).expand({T, G, per_group}).reshape({T, cfg.num_experts});
    choice = choice.masked_fill(keep_TE.logical_not(), -std::numeric_limits<double>::infinity());
  }
  return std::get<1>(choice.topk(cfg.top_k, -1, /*largest=*/true, /*sorted=*/true));
}

at::Tensor gate_weights(const at::Tensor& scores_TE, const at::Tensor& topk_idx_TK, const RouterConfig& cfg) {
  at::Tensor w = scores_TE.gather(1, topk_idx_TK);
  if (cfg.scoring == RouterScoring::kSigmoid) {
    if (cfg.norm_topk_prob) w = w / (w.sum(-1, /*keepdim=*/true) + 1e-20);
  } else if (cfg.norm_topk_prob) {
    w = w / w.sum(-1, /*keepdim=*/true);
  }
  if (cfg.routed_scaling_factor != 1.0) w = w * cfg.routed_scaling_factor;
  return w;
}

void route(const at::Tensor& router_logits_TE, const RouterConfig& cfg, at::Tensor* topk_idx_TK,
           at::Tensor* topk_weight_TK, const at::Tensor& score_bias_E, const at::Tensor& forced_topk_idx_TK) {
  at::Tensor scores = router_scores(router_logits_TE, cfg);
  if (forced_topk_idx_TK.defined()) {
    check_forced(forced_topk_idx_TK, router_logits_TE, cfg);
    at::Tensor forced = forced_topk_idx_TK.to(router_logits_TE.device());
    // A token without a record (a -1 among its ids: the last token of a response, padding)
    // routes live.
    at::Tensor recorded_T1 = forced.ge(0).all(1, /*keepdim=*/true);
    *topk_idx_TK = recorded_T1.all().item<bool>()
                       ? forced
                       : at::where(recorded_T1, forced, select_experts(scores, cfg, score_bias_E));
  } else {
    *topk_idx_TK = select_experts(scores, cfg, score_bias_E);
  }
  *topk_weight_TK = gate_weights(scores, *topk_idx_TK, cfg).to(router_logits_TE.scalar_type());
}

}  // namespace moerl::model
