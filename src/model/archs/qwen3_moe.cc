// Qwen3-MoE (model_type "qwen3_moe"): GQA attention with per-head RMSNorm on q and k,
// top-k softmax router with optional renormalisation (norm_topk_prob), SwiGLU experts under
// mlp.experts.{e}.{gate,up,down}_proj, dense SwiGLU layers where mlp_only_layers /
// decoder_sparse_step say so.
#include "model/archs/decoder.h"

namespace moerl::model {
namespace {

using namespace arch_util;

class Qwen3Moe final : public Arch {
 public:
  const char* model_type() const override { return "qwen3_moe"; }

  std::vector<ParamSpec> param_specs(const io::HfConfig& cfg, ExpertRange experts) const override {
    return decoder_specs(
        cfg, [&](const std::string& p, std::vector<ParamSpec>& s) { add_attention_specs(cfg, p + "self_attn.", true, s); },
        [&](const std::string& p, std::vector<ParamSpec>& s) {
          s.push_back({p + "mlp.gate.weight", {cfg.num_experts, cfg.hidden_size}, Init::kNormal});
          add_expert_specs(p + "mlp.", experts, cfg.hidden_size, cfg.moe_intermediate_size, proj_expert_name, s);
        });
  }

  void canonicalize(const io::HfConfig& cfg, ExpertRange experts, Params& t) const override {
    canonicalize_experts(cfg, experts, "mlp.", proj_expert_name, t);
  }

  LayerWeights bind_layer(const io::HfConfig& cfg, ExpertRange experts, const Params& params,
                          int64_t i) const override {
    return bind_decoder_layer(
        cfg, params, i,
        [&](const std::string& p, LayerWeights& w) {
          w.attn = bind_attention(params, p + "self_attn.", /*qk_norm=*/true, cfg.attention_bias);
        },
        [&](const std::string& p, LayerWeights& w) {
          w.moe.router_EH = get(params, p + "mlp.gate.weight");
          w.moe.experts = bind_experts(params, p + "mlp.", experts, proj_expert_name);
        });
  }
};

}  // namespace

const Arch& qwen3_moe_arch() {
  static const Qwen3Moe arch;
  return arch;
}

}  // namespace moerl::model
