// The decoder layer body shared by Model::forward and the activation checkpoint's recompute.
#include "model/decoder_layer.h"

#include "model/common/layers.h"
#include "model/common/moe.h"

namespace moerl::model {

LayerOutput decoder_layer(const LayerWeights& w, int64_t layer, const at::Tensor& h_BTH, const at::Tensor& forced_TK,
                          const DecoderEnv& env) {
  const int64_t B = h_BTH.size(0), T = h_BTH.size(1), H = h_BTH.size(2);
  at::Tensor a = rms_norm(h_BTH, w.input_norm, env.rms_norm_eps);
  at::Tensor h = h_BTH + (w.attention == AttentionKind::kMla ? mla_attention(w.mla, env.mla, a, env.ctx, env.cache, layer)
                                                             : attention(w.attn, env.shape, a, env.ctx, env.cache, layer));
  at::Tensor x = rms_norm(h, w.post_attention_norm, env.rms_norm_eps);
  LayerOutput o;
  if (!w.is_moe) {
    o.h_BTH = h + swiglu(x, w.mlp.gate_IH, w.mlp.up_IH, w.mlp.down_HI);
    return o;
  }
  MoeOutput m = moe_forward(w.moe, x.reshape({B * T, H}), env.router, *env.group, forced_TK);
  o.h_BTH = h + m.y_TH.view({B, T, H});
  o.router_logits_TE = m.router_logits_TE;
  o.topk_idx_TK = m.topk_idx_TK;
  o.topk_weight_TK = m.topk_weight_TK;
  o.expert_load_E = m.expert_load_E;
  return o;
}

}  // namespace moerl::model
