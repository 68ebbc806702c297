// The decoder skeleton the architecture files share (included by archs/*.cc only, so that
// the rest of moerl does not depend on it): per layer "model.layers.{i}.": input_layernorm,
// the attention's tensors, post_attention_layernorm, then the MoE block's tensors on MoE
// layers (cfg.is_moe_layer) or the dense SwiGLU mlp.{gate,up,down}_proj of
// intermediate_size; embeddings first and the final norm / head last.
//
//   return decoder_specs(cfg, add_my_attention, add_my_moe);
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "model/archs/arch.h"

namespace moerl::model::arch_util {

// `attention` and `moe` add the architecture's own specs under the layer prefix.
using LayerSpecFn = std::function<void(const std::string& layer_prefix, std::vector<ParamSpec>& specs)>;
std::vector<ParamSpec> decoder_specs(const io::HfConfig& cfg, const LayerSpecFn& attention, const LayerSpecFn& moe);

// `attention` and `moe` bind the architecture's own weights under the layer prefix.
using LayerBindFn = std::function<void(const std::string& layer_prefix, LayerWeights& w)>;
LayerWeights bind_decoder_layer(const io::HfConfig& cfg, const Params& p, int64_t layer, const LayerBindFn& attention,
                                const LayerBindFn& moe);

}  // namespace moerl::model::arch_util
