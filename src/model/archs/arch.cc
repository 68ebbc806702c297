// Helpers shared by the architecture files: the Llama-family names every arch here uses
// for embeddings, attention and the head, and the fused-expert splitting.
#include "model/archs/arch.h"
#include "model/archs/decoder.h"

#include "base/check.h"
#include "base/error.h"

namespace moerl::model::arch_util {

std::string layer_prefix(int64_t layer) { return "model.layers." + std::to_string(layer) + "."; }

std::vector<ParamSpec> decoder_specs(const io::HfConfig& cfg, const LayerSpecFn& attention, const LayerSpecFn& moe) {
  std::vector<ParamSpec> s;
  add_embedding_specs(cfg, s);
  const int64_t H = cfg.hidden_size;
  for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) {
    const std::string p = layer_prefix(i);
    s.push_back({p + "input_layernorm.weight", {H}, Init::kOnes});
    attention(p, s);
    s.push_back({p + "post_attention_layernorm.weight", {H}, Init::kOnes});
    if (cfg.is_moe_layer(i)) {
      moe(p, s);
    } else {
      add_swiglu_specs(p + "mlp.", H, cfg.intermediate_size, s);
    }
  }
  add_head_specs(cfg, s);
  return s;
}

LayerWeights bind_decoder_layer(const io::HfConfig& cfg, const Params& p, int64_t layer, const LayerBindFn& attention,
                                const LayerBindFn& moe) {
  const std::string prefix = layer_prefix(layer);
  LayerWeights w;
  w.input_norm = get(p, prefix + "input_layernorm.weight");
  w.post_attention_norm = get(p, prefix + "post_attention_layernorm.weight");
  attention(prefix, w);
  w.is_moe = cfg.is_moe_layer(layer);
  if (w.is_moe) {
    moe(prefix, w);
  } else {
    w.mlp = bind_swiglu(p, prefix + "mlp.");
  }
  return w;
}

std::string proj_expert_name(const std::string& prefix, int64_t e, int which) {
  static const char* kWhich[] = {"gate_proj", "up_proj", "down_proj"};
  return prefix + "experts." + std::to_string(e) + "." + kWhich[which] + ".weight";
}

void add_swiglu_specs(const std::string& prefix, int64_t H, int64_t I, std::vector<ParamSpec>& specs) {
  specs.push_back({prefix + "gate_proj.weight", {I, H}, Init::kNormal});
  specs.push_back({prefix + "up_proj.weight", {I, H}, Init::kNormal});
  specs.push_back({prefix + "down_proj.weight", {H, I}, Init::kNormal});
}

ExpertWeights bind_swiglu(const Params& p, const std::string& prefix) {
  return {get(p, prefix + "gate_proj.weight"), get(p, prefix + "up_proj.weight"), get(p, prefix + "down_proj.weight")};
}

void add_expert_specs(const std::string& prefix, ExpertRange experts, int64_t H, int64_t I,
                      std::string (*expert_name)(const std::string& prefix, int64_t e, int which),
                      std::vector<ParamSpec>& specs) {
  for (int64_t e = experts.first; e < experts.first + experts.count; ++e) {
    specs.push_back({expert_name(prefix, e, 0), {I, H}, Init::kNormal});
    specs.push_back({expert_name(prefix, e, 1), {I, H}, Init::kNormal});
    specs.push_back({expert_name(prefix, e, 2), {H, I}, Init::kNormal});
  }
}

std::vector<ExpertWeights> bind_experts(const Params& p, const std::string& prefix, ExpertRange experts,
                                        std::string (*expert_name)(const std::string& prefix, int64_t e, int which)) {
  std::vector<ExpertWeights> out;
  for (int64_t e = experts.first; e < experts.first + experts.count; ++e) {
    out.push_back({get(p, expert_name(prefix, e, 0)), get(p, expert_name(prefix, e, 1)),
                   get(p, expert_name(prefix, e, 2))});
  }
  return out;
}

void add_embedding_specs(const io::HfConfig& cfg, std::vector<ParamSpec>& specs) {
  specs.push_back({"model.embed_tokens.weight", {cfg.vocab_size, cfg.hidden_size}, Init::kNormal});
}

void add_head_specs(const io::HfConfig& cfg, std::vector<ParamSpec>& specs) {
  specs.push_back({"model.norm.weight", {cfg.hidden_size}, Init::kOnes});
  if (!cfg.tie_word_embeddings) {
    specs.push_back({"lm_head.weight", {cfg.vocab_size, cfg.hidden_size}, Init::kNormal});
  }
}

void add_attention_specs(const io::HfConfig& cfg, const std::string& prefix, bool qk_norm,
                         std::vector<ParamSpec>& specs) {
  const int64_t H = cfg.hidden_size, D = cfg.head_dim;
  const int64_t q_out = cfg.num_attention_heads * D, kv_out = cfg.num_key_value_heads * D;
  specs.push_back({prefix + "q_proj.weight", {q_out, H}, Init::kNormal});
  specs.push_back({prefix + "k_proj.weight", {kv_out, H}, Init::kNormal});
  specs.push_back({prefix + "v_proj.weight", {kv_out, H}, Init::kNormal});
  specs.push_back({prefix + "o_proj.weight", {H, q_out}, Init::kNormal});
  if (cfg.attention_bias) {
    specs.push_back({prefix + "q_proj.bias", {q_out}, Init::kZeros});
    specs.push_back({prefix + "k_proj.bias", {kv_out}, Init::kZeros});
    specs.push_back({prefix + "v_proj.bias", {kv_out}, Init::kZeros});
  }
  if (qk_norm) {
    specs.push_back({prefix + "q_norm.weight", {D}, Init::kOnes});
    specs.push_back({prefix + "k_norm.weight", {D}, Init::kOnes});
  }
}

const at::Tensor& get(const Params& p, const std::string& name) {
  auto it = p.find(name);
  MOERL_CHECK(it != p.end()) << "parameter " << name << " was not created";
  return it->second;
}

AttentionWeights bind_attention(const Params& p, const std::string& prefix, bool qk_norm, bool bias) {
  AttentionWeights w;
  w.q_proj = get(p, prefix + "q_proj.weight");
  w.k_proj = get(p, prefix + "k_proj.weight");
  w.v_proj = get(p, prefix + "v_proj.weight");
  w.o_proj = get(p, prefix + "o_proj.weight");
  if (bias) {
    w.q_bias = get(p, prefix + "q_proj.bias");
    w.k_bias = get(p, prefix + "k_proj.bias");
    w.v_bias = get(p, prefix + "v_proj.bias");
  }
  if (qk_norm) {
    w.q_norm = get(p, prefix + "q_norm.weight");
    w.k_norm = get(p, prefix + "k_norm.weight");
  }
  return w;
}

void split_fused_experts(const std::string& prefix, ExpertRange experts,
                         std::string (*expert_name)(const std::string& prefix, int64_t e, int which),
                         Params& tensors) {
  auto gu = tensors.find(prefix + "experts.gate_up_proj");
  auto dn = tensors.find(prefix + "experts.down_proj");
  if (gu == tensors.end() && dn == tensors.end()) return;
  if (gu == tensors.end() || dn == tensors.end()) {
    throw Error("checkpoint has only one of " + prefix + "experts.gate_up_proj and " + prefix +
                    "experts.down_proj (fused expert layout needs both)",
                "re-save the checkpoint; it looks truncated or hand-edited");
  }
  const at::Tensor gate_up = gu->second, down = dn->second;
  if (gate_up.dim() != 3 || down.dim() != 3 || gate_up.size(0) != down.size(0) ||
      gate_up.size(1) != 2 * down.size(2) || gate_up.size(2) != down.size(1)) {
    throw Error("fused experts " + prefix + "experts.gate_up_proj " + std::string(c10::str(gate_up.sizes())) +
                    " and down_proj " + std::string(c10::str(down.sizes())) +
                    " do not have shapes [E,2I,H] and [E,H,I]",
                "this is the transformers 5 layout; other fused layouts are not supported");
  }
  const int64_t I = down.size(2);
  const int64_t E = gate_up.size(0);
  if (experts.first + experts.count > E) {
    throw Error(prefix + "experts.gate_up_proj holds " + std::to_string(E) + " experts, the config asks for " +
                    std::to_string(experts.first + experts.count),
                "check num_experts / num_local_experts in config.json");
  }
  for (int64_t e = experts.first; e < experts.first + experts.count; ++e) {
    // NOTE: gate rows come first in gate_up_proj (HF chunks gate, up in that order).
    tensors[expert_name(prefix, e, 0)] = gate_up[e].narrow(0, 0, I).contiguous();
    tensors[expert_name(prefix, e, 1)] = gate_up[e].narrow(0, I, I).contiguous();
    tensors[expert_name(prefix, e, 2)] = down[e].contiguous();
  }
  tensors.erase(prefix + "experts.gate_up_proj");
  tensors.erase(prefix + "experts.down_proj");
}

void drop_remote_experts(const std::string& prefix, int64_t num_experts, ExpertRange experts,
                         Params& tensors) {
  const std::string base = prefix + "experts.";
  for (auto it = tensors.lower_bound(base); it != tensors.end() && it->first.rfind(base, 0) == 0;) {
    const std::string rest = it->first.substr(base.size());
    const size_t dot = rest.find('.');
    bool remote = false;
    if (dot != std::string::npos) {
      try {
        const int64_t e = std::stoll(rest.substr(0, dot));
        remote = e < experts.first || e >= experts.first + experts.count;
      } catch (const std::exception&) {
        remote = false;
      }
    }
    it = remote ? tensors.erase(it) : std::next(it);
  }
}

void canonicalize_experts(const io::HfConfig& cfg, ExpertRange experts, const std::string& moe_prefix,
                          std::string (*expert_name)(const std::string& prefix, int64_t e, int which),
                          Params& tensors) {
  for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) {
    if (!cfg.is_moe_layer(i)) continue;
    const std::string p = layer_prefix(i) + moe_prefix;
    split_fused_experts(p, experts, expert_name, tensors);
    drop_remote_experts(p, cfg.num_experts, experts, tensors);
  }
}

}  // namespace moerl::model::arch_util
