// Qwen2-MoE (model_type "qwen2_moe", Qwen1.5-MoE / Qwen2-57B-A14B): GQA attention with q/k/v
// biases (qkv_bias) and no q/k norms, top-k softmax router (norm_topk_prob), SwiGLU experts
// under mlp.experts.{e}.{gate,up,down}_proj, and one shared expert per MoE layer
// (mlp.shared_expert.*) scaled per token by sigmoid(mlp.shared_expert_gate(x)); dense SwiGLU
// layers where mlp_only_layers / decoder_sparse_step say so.
#include "model/archs/decoder.h"

namespace moerl::model {
namespace {

using namespace arch_util;

class Qwen2Moe final : public Arch {
 public:
  const char* model_type() const override { return "qwen2_moe"; }

  std::vector<ParamSpec> param_specs(const io::HfConfig& cfg, ExpertRange experts) const override {
    const int64_t H = cfg.hidden_size;
    return decoder_specs(
        cfg, [&](const std::string& p, std::vector<ParamSpec>& s) { add_attention_specs(cfg, p + "self_attn.", false, s); },
        [&](const std::string& p, std::vector<ParamSpec>& s) {
          s.push_back({p + "mlp.gate.weight", {cfg.num_experts, H}, Init::kNormal});
          add_expert_specs(p + "mlp.", experts, H, cfg.moe_intermediate_size, proj_expert_name, s);
          add_swiglu_specs(p + "mlp.shared_expert.", H, cfg.shared_expert_intermediate_size, s);
          s.push_back({p + "mlp.shared_expert_gate.weight", {1, H}, Init::kNormal});
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
          w.attn = bind_attention(params, p + "self_attn.", /*qk_norm=*/false, cfg.attention_bias);
        },
        [&](const std::string& p, LayerWeights& w) {
          w.moe.router_EH = get(params, p + "mlp.gate.weight");
          w.moe.experts = bind_experts(params, p + "mlp.", experts, proj_expert_name);
          w.moe.shared = {bind_swiglu(params, p + "mlp.shared_expert."), get(params, p + "mlp.shared_expert_gate.weight")};
        });
  }
};

}  // namespace

const Arch& qwen2_moe_arch() {
  static const Qwen2Moe arch;
  return arch;
}

}  // namespace moerl::model
