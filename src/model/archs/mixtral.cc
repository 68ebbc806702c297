// Mixtral (model_type "mixtral"): GQA attention without q/k norms, every layer a sparse MoE
// block under block_sparse_moe (gate + experts.{e}.w1/w3/w2 = gate/up/down), router softmax
// then top-k then renormalise. transformers 5 keeps these in memory as mlp.gate and fused
// mlp.experts.{gate_up_proj,down_proj}; both spellings load, the hub one is saved.
#include "model/archs/arch.h"

namespace moerl::model {
namespace {

using namespace arch_util;

std::string expert_name(const std::string& prefix, int64_t e, int which) {
  static const char* kWhich[] = {"w1", "w3", "w2"};  // gate, up, down
  return prefix + "experts." + std::to_string(e) + "." + kWhich[which] + ".weight";
}

class Mixtral final : public Arch {
 public:
  const char* model_type() const override { return "mixtral"; }

  std::vector<ParamSpec> param_specs(const io::HfConfig& cfg, ExpertRange experts) const override {
    std::vector<ParamSpec> s;
    add_embedding_specs(cfg, s);
    const int64_t H = cfg.hidden_size, I = cfg.intermediate_size;
    for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) {
      const std::string p = layer_prefix(i);
      s.push_back({p + "input_layernorm.weight", {H}, Init::kOnes});
      add_attention_specs(cfg, p + "self_attn.", /*qk_norm=*/false, s);
      s.push_back({p + "post_attention_layernorm.weight", {H}, Init::kOnes});
      s.push_back({p + "block_sparse_moe.gate.weight", {cfg.num_experts, H}, Init::kNormal});
      for (int64_t e = experts.first; e < experts.first + experts.count; ++e) {
        s.push_back({expert_name(p + "block_sparse_moe.", e, 0), {I, H}, Init::kNormal});
        s.push_back({expert_name(p + "block_sparse_moe.", e, 1), {I, H}, Init::kNormal});
        s.push_back({expert_name(p + "block_sparse_moe.", e, 2), {H, I}, Init::kNormal});
      }
    }
    add_head_specs(cfg, s);
    return s;
  }

  void canonicalize(const io::HfConfig& cfg, ExpertRange experts, Params& t) const override {
    for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) {
      const std::string p = layer_prefix(i);
      const std::string moe = p + "block_sparse_moe.";
      // transformers 5 in-memory names: mlp.gate.weight, mlp.experts.{gate_up_proj,down_proj}.
      auto g = t.find(p + "mlp.gate.weight");
      if (g != t.end() && !t.count(moe + "gate.weight")) {
        t[moe + "gate.weight"] = g->second;
        t.erase(g);
      }
      for (const char* fused : {"experts.gate_up_proj", "experts.down_proj"}) {
        auto f = t.find(p + "mlp." + fused);
        if (f != t.end()) {
          t[moe + fused] = f->second;
          t.erase(f);
        }
      }
      split_fused_experts(moe, experts, expert_name, t);
      drop_remote_experts(moe, cfg.num_experts, experts, t);
    }
  }

  RouterConfig router_config(const io::HfConfig& cfg) const override {
    return {cfg.num_experts, cfg.num_experts_per_tok, /*norm_topk_prob=*/true};
  }

  LayerWeights bind_layer(const io::HfConfig& cfg, ExpertRange experts, const Params& params,
                          int64_t i) const override {
    const std::string p = layer_prefix(i);
    const std::string moe = p + "block_sparse_moe.";
    LayerWeights w;
    w.input_norm = get(params, p + "input_layernorm.weight");
    w.post_attention_norm = get(params, p + "post_attention_layernorm.weight");
    w.attn = bind_attention(params, p + "self_attn.", /*qk_norm=*/false, cfg.attention_bias);
    w.is_moe = true;
    w.moe.router_EH = get(params, moe + "gate.weight");
    for (int64_t e = experts.first; e < experts.first + experts.count; ++e) {
      w.moe.experts.push_back({get(params, expert_name(moe, e, 0)), get(params, expert_name(moe, e, 1)),
                               get(params, expert_name(moe, e, 2))});
    }
    return w;
  }
};

}  // namespace

const Arch& mixtral_arch() {
  static const Mixtral arch;
  return arch;
}

}  // namespace moerl::model
