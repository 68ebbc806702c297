// DeepSeek-V3 (model_type "deepseek_v3"; also Kimi K2, DeepSeek-R1 and others of its
// architecture): multi-head latent attention (self_attn.{q_proj | q_a_proj, q_a_layernorm,
// q_b_proj}, kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj), dense SwiGLU in the first
// first_k_dense_replace layers, then MoE layers: a sigmoid router in float32 (mlp.gate.weight)
// with the selection-only buffer mlp.gate.e_score_correction_bias, group-limited top-k,
// routed_scaling_factor, experts mlp.experts.{e}.{gate,up,down}_proj and the shared experts
// mlp.shared_experts.{gate,up,down}_proj (width moe_intermediate_size * n_shared_experts).
// The MTP layers of DeepSeek's checkpoints (model.layers.{num_hidden_layers}.*) are not
// used (transformers ignores them too).
#include "model/archs/decoder.h"

namespace moerl::model {
namespace {

using namespace arch_util;

class DeepseekV3 final : public Arch {
 public:
  const char* model_type() const override { return "deepseek_v3"; }

  std::vector<ParamSpec> param_specs(const io::HfConfig& cfg, ExpertRange experts) const override {
    const int64_t H = cfg.hidden_size, E = cfg.num_experts;
    return decoder_specs(
        cfg, [&](const std::string& p, std::vector<ParamSpec>& s) { add_mla_specs(cfg, p + "self_attn.", s); },
        [&](const std::string& p, std::vector<ParamSpec>& s) {
          s.push_back({p + "mlp.gate.weight", {E, H}, Init::kNormal});
          s.push_back({p + "mlp.gate.e_score_correction_bias", {E}, Init::kZeros, TensorRole::kBuffer});
          add_expert_specs(p + "mlp.", experts, H, cfg.moe_intermediate_size, proj_expert_name, s);
          if (cfg.n_shared_experts > 0) {
            add_swiglu_specs(p + "mlp.shared_experts.", H, cfg.moe_intermediate_size * cfg.n_shared_experts, s);
          }
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
          w.attention = AttentionKind::kMla;
          w.mla = bind_mla(cfg, params, p + "self_attn.");
        },
        [&](const std::string& p, LayerWeights& w) {
          w.moe.router_EH = get(params, p + "mlp.gate.weight");
          w.moe.score_bias_E = get(params, p + "mlp.gate.e_score_correction_bias");
          w.moe.experts = bind_experts(params, p + "mlp.", experts, proj_expert_name);
          if (cfg.n_shared_experts > 0) w.moe.shared.mlp = bind_swiglu(params, p + "mlp.shared_experts.");
        });
  }

  RouterConfig router_config(const io::HfConfig& cfg) const override {
    RouterConfig r{cfg.num_experts, cfg.num_experts_per_tok, cfg.norm_topk_prob};
    r.scoring = RouterScoring::kSigmoid;
    r.num_groups = cfg.n_group;
    r.topk_groups = cfg.topk_group;
    r.routed_scaling_factor = cfg.routed_scaling_factor;
    r.logits_precision = RouterPrecision::kFloat32;
    return r;
  }

  KvCacheShape kv_cache_shape(const io::HfConfig& cfg) const override {
    return {KvCacheKind::kLatent, 0, 0, cfg.kv_lora_rank + cfg.qk_rope_head_dim};
  }

 private:
  static void add_mla_specs(const io::HfConfig& cfg, const std::string& p, std::vector<ParamSpec>& s) {
    const int64_t H = cfg.hidden_size, Hq = cfg.num_attention_heads, R = cfg.kv_lora_rank;
    const int64_t qk = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim;
    if (cfg.q_lora_rank > 0) {
      s.push_back({p + "q_a_proj.weight", {cfg.q_lora_rank, H}, Init::kNormal});
      s.push_back({p + "q_a_layernorm.weight", {cfg.q_lora_rank}, Init::kOnes});
      s.push_back({p + "q_b_proj.weight", {Hq * qk, cfg.q_lora_rank}, Init::kNormal});
    } else {
      s.push_back({p + "q_proj.weight", {Hq * qk, H}, Init::kNormal});
    }
    s.push_back({p + "kv_a_proj_with_mqa.weight", {R + cfg.qk_rope_head_dim, H}, Init::kNormal});
    s.push_back({p + "kv_a_layernorm.weight", {R}, Init::kOnes});
    s.push_back({p + "kv_b_proj.weight", {Hq * (cfg.qk_nope_head_dim + cfg.v_head_dim), R}, Init::kNormal});
    s.push_back({p + "o_proj.weight", {H, Hq * cfg.v_head_dim}, Init::kNormal});
  }

  static MlaWeights bind_mla(const io::HfConfig& cfg, const Params& params, const std::string& p) {
    MlaWeights m;
    if (cfg.q_lora_rank > 0) {
      m.q_a_proj = get(params, p + "q_a_proj.weight");
      m.q_a_norm = get(params, p + "q_a_layernorm.weight");
      m.q_b_proj = get(params, p + "q_b_proj.weight");
    } else {
      m.q_proj = get(params, p + "q_proj.weight");
    }
    m.kv_a_proj = get(params, p + "kv_a_proj_with_mqa.weight");
    m.kv_a_norm = get(params, p + "kv_a_layernorm.weight");
    m.kv_b_proj = get(params, p + "kv_b_proj.weight");
    m.o_proj = get(params, p + "o_proj.weight");
    return m;
  }
};

}  // namespace

const Arch& deepseek_v3_arch() {
  static const DeepseekV3 arch;
  return arch;
}

}  // namespace moerl::model
