// Qwen3-MoE (model_type "qwen3_moe"): GQA attention with per-head RMSNorm on q and k,
// top-k softmax router with optional renormalisation (norm_topk_prob), SwiGLU experts under
// mlp.experts.{e}.{gate,up,down}_proj, dense SwiGLU layers where mlp_only_layers /
// decoder_sparse_step say so.
#include "model/archs/arch.h"

namespace moerl::model {
namespace {

using namespace arch_util;

std::string expert_name(const std::string& prefix, int64_t e, int which) {
  static const char* kWhich[] = {"gate_proj", "up_proj", "down_proj"};
  return prefix + "experts." + std::to_string(e) + "." + kWhich[which] + ".weight";
}

class Qwen3Moe final : public Arch {
 public:
  const char* model_type() const override { return "qwen3_moe"; }

  std::vector<ParamSpec> param_specs(const io::HfConfig& cfg, ExpertRange experts) const override {
    std::vector<ParamSpec> s;
    add_embedding_specs(cfg, s);
    const int64_t H = cfg.hidden_size;
    for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) {
      const std::string p = layer_prefix(i);
      s.push_back({p + "input_layernorm.weight", {H}, Init::kOnes});
      add_attention_specs(cfg, p + "self_attn.", /*qk_norm=*/true, s);
      s.push_back({p + "post_attention_layernorm.weight", {H}, Init::kOnes});
      if (cfg.is_moe_layer(i)) {
        const int64_t I = cfg.moe_intermediate_size;
        s.push_back({p + "mlp.gate.weight", {cfg.num_experts, H}, Init::kNormal});
        for (int64_t e = experts.first; e < experts.first + experts.count; ++e) {
          s.push_back({expert_name(p + "mlp.", e, 0), {I, H}, Init::kNormal});
          s.push_back({expert_name(p + "mlp.", e, 1), {I, H}, Init::kNormal});
          s.push_back({expert_name(p + "mlp.", e, 2), {H, I}, Init::kNormal});
        }
      } else {
        const int64_t I = cfg.intermediate_size;
        s.push_back({p + "mlp.gate_proj.weight", {I, H}, Init::kNormal});
        s.push_back({p + "mlp.up_proj.weight", {I, H}, Init::kNormal});
        s.push_back({p + "mlp.down_proj.weight", {H, I}, Init::kNormal});
      }
    }
    add_head_specs(cfg, s);
    return s;
  }

  void canonicalize(const io::HfConfig& cfg, ExpertRange experts, Params& t) const override {
    for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) {
      if (!cfg.is_moe_layer(i)) continue;
      const std::string p = layer_prefix(i) + "mlp.";
      split_fused_experts(p, experts, expert_name, t);
      drop_remote_experts(p, cfg.num_experts, experts, t);
    }
  }

  LayerWeights bind_layer(const io::HfConfig& cfg, ExpertRange experts, const Params& params,
                          int64_t i) const override {
    const std::string p = layer_prefix(i);
    LayerWeights w;
    w.input_norm = get(params, p + "input_layernorm.weight");
    w.post_attention_norm = get(params, p + "post_attention_layernorm.weight");
    w.attn = bind_attention(params, p + "self_attn.", /*qk_norm=*/true, cfg.attention_bias);
    w.is_moe = cfg.is_moe_layer(i);
    if (w.is_moe) {
      w.moe.router_EH = get(params, p + "mlp.gate.weight");
      for (int64_t e = experts.first; e < experts.first + experts.count; ++e) {
        w.moe.experts.push_back({get(params, expert_name(p + "mlp.", e, 0)),
                                 get(params, expert_name(p + "mlp.", e, 1)),
                                 get(params, expert_name(p + "mlp.", e, 2))});
      }
    } else {
      w.mlp = {get(params, p + "mlp.gate_proj.weight"), get(params, p + "mlp.up_proj.weight"),
               get(params, p + "mlp.down_proj.weight")};
    }
    return w;
  }
};

}  // namespace

const Arch& qwen3_moe_arch() {
  static const Qwen3Moe arch;
  return arch;
}

}  // namespace moerl::model
