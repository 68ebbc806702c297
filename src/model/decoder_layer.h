// One decoder layer of the shared forward (pre-norm residual block: attention, then the
// dense SwiGLU MLP or the MoE block), as Model::forward runs it layer by layer and as the
// activation checkpoint (checkpointed_layer.h) re-runs it in the backward.
//
//   DecoderEnv env{...};                                  // shared by every layer of a forward
//   LayerOutput o = decoder_layer(w, i, h_BTH, forced_TK, env);
//   h_BTH = o.h_BTH;  // o.router_logits_TE etc. are defined on MoE layers only
//
// Legend: B rows, T tokens, H hidden, E experts, K top-k.
// Collective on MoE layers when env.group spans ranks (dispatch/combine).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "ep/ep.h"
#include "model/archs/arch.h"
#include "model/common/attention.h"
#include "model/common/mla_attention.h"
#include "model/common/router.h"

namespace moerl::model {

// What every layer of one forward reads besides its weights. Holds tensors by value (a
// checkpoint keeps a copy until its backward); `cache` and `group` are borrowed.
struct DecoderEnv {
  AttentionShape shape;
  MlaShape mla;
  RouterConfig router;
  double rms_norm_eps = 1e-6;
  AttentionContext ctx;
  KvCache* cache = nullptr;
  ep::Group* group = nullptr;
};

struct LayerOutput {
  at::Tensor h_BTH;
  // MoE layers only (undefined on dense ones): as LayerRouting (model.h).
  at::Tensor router_logits_TE, topk_idx_TK, topk_weight_TK, expert_load_E;
};

// Layer `layer` on h_BTH. forced_TK (int64 [B*T,K], optional): route these tokens to these
// experts (routing replay; -1 rows route live).
LayerOutput decoder_layer(const LayerWeights& w, int64_t layer, const at::Tensor& h_BTH, const at::Tensor& forced_TK,
                          const DecoderEnv& env);

}  // namespace moerl::model
