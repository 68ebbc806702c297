// Mixtral (model_type "mixtral"): GQA attention without q/k norms, every layer a sparse MoE
// block under block_sparse_moe (gate + experts.{e}.w1/w3/w2 = gate/up/down), router softmax
// then top-k then renormalise. transformers 5 keeps these in memory as mlp.gate and fused
// mlp.experts.{gate_up_proj,down_proj}; both spellings load, the hub one is saved.
#include "model/archs/decoder.h"

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
    return decoder_specs(
        cfg, [&](const std::string& p, std::vector<ParamSpec>& s) { add_attention_specs(cfg, p + "self_attn.", false, s); },
        [&](const std::string& p, std::vector<ParamSpec>& s) {
          s.push_back({p + "block_sparse_moe.gate.weight", {cfg.num_experts, cfg.hidden_size}, Init::kNormal});
          add_expert_specs(p + "block_sparse_moe.", experts, cfg.hidden_size, cfg.intermediate_size, expert_name, s);
        });
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
    return bind_decoder_layer(
        cfg, params, i,
        [&](const std::string& p, LayerWeights& w) {
          w.attn = bind_attention(params, p + "self_attn.", /*qk_norm=*/false, cfg.attention_bias);
        },
        [&](const std::string& p, LayerWeights& w) {
          w.moe.router_EH = get(params, p + "block_sparse_moe.gate.weight");
          w.moe.experts = bind_experts(params, p + "block_sparse_moe.", experts, expert_name);
        });
  }
};

}  // namespace

const Arch& mixtral_arch() {
  static const Mixtral arch;
  return arch;
}

}  // namespace moerl::model
