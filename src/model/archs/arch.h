// What an architecture file provides: its parameter names and shapes (Hugging Face names),
// how a checkpoint's tensors map onto them (e.g. fused expert tensors written by
// transformers 5), and how one decoder layer's weights are bound for the shared forward.
// One file per architecture in model/archs/, registered with one line in registry.cc.
//
//   const Arch& arch = find_arch(cfg.model_type);   // Error for an unknown model_type
//   for (const ParamSpec& p : arch.param_specs(cfg, experts)) ...
//
// Archs are stateless singletons: thread-safe.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/hf_config.h"
#include "model/common/attention.h"
#include "model/common/kv_cache.h"
#include "model/common/mla_attention.h"
#include "model/common/moe.h"

namespace moerl::model {

using Params = std::map<std::string, at::Tensor>;

enum class Init {
  kNormal,  // N(0, 0.02^2), as HF's initializer_range
  kOnes,    // norm weights
  kZeros,   // biases
};

enum class TensorRole {
  kParameter,  // trained: an autograd leaf the optimizer updates
  kBuffer,     // not trained (e.g. e_score_correction_bias): float32 (float64 in double
               // models) whatever the model dtype, saved and loaded under its HF name
};

struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
  Init init = Init::kNormal;
  TensorRole role = TensorRole::kParameter;
};

// The experts this rank holds: global ids [first, first + count).
struct ExpertRange {
  int64_t first = 0;
  int64_t count = 0;
};

enum class AttentionKind {
  kGqa,  // grouped-query attention (attention.h)
  kMla,  // multi-head latent attention (mla_attention.h)
};

// One decoder layer's weights, bound once from Params (the tensors are the same leaves).
struct LayerWeights {
  at::Tensor input_norm, post_attention_norm;
  AttentionKind attention = AttentionKind::kGqa;
  AttentionWeights attn;  // kGqa
  MlaWeights mla;         // kMla
  bool is_moe = false;
  MoeWeights moe;     // if is_moe
  ExpertWeights mlp;  // dense SwiGLU otherwise
};

class Arch {
 public:
  virtual ~Arch() = default;
  virtual const char* model_type() const = 0;
  // Every parameter and buffer this rank holds, in a stable order (embeddings, layers, norm,
  // head): init_random draws them in this order.
  virtual std::vector<ParamSpec> param_specs(const io::HfConfig& cfg, ExpertRange experts) const = 0;
  // Rewrites checkpoint tensors into param_specs() names in place (split fused experts,
  // rename aliases, drop experts other ranks hold). Unknown extra tensors are left alone.
  virtual void canonicalize(const io::HfConfig& cfg, ExpertRange experts, Params& tensors) const = 0;
  virtual LayerWeights bind_layer(const io::HfConfig& cfg, ExpertRange experts, const Params& params,
                                  int64_t layer) const = 0;
  // Router semantics; by default softmax -> top-k -> renormalise iff norm_topk_prob.
  virtual RouterConfig router_config(const io::HfConfig& cfg) const {
    return {cfg.num_experts, cfg.num_experts_per_tok, cfg.norm_topk_prob};
  }
  // What the KV cache keeps per token; by default keys and values per kv head.
  virtual KvCacheShape kv_cache_shape(const io::HfConfig& cfg) const {
    return {KvCacheKind::kHeads, cfg.num_key_value_heads, cfg.head_dim, 0};
  }
};

// Registry (registry.cc). Error naming the model_type and the known ones when absent.
const Arch& find_arch(const std::string& model_type);
std::vector<std::string> known_architectures();

// Shared helpers for arch files.
namespace arch_util {
// model.embed_tokens.weight; lm_head.weight unless tied.
void add_embedding_specs(const io::HfConfig& cfg, std::vector<ParamSpec>& specs);
// model.norm.weight (+ lm_head.weight unless tied), appended after the layers.
void add_head_specs(const io::HfConfig& cfg, std::vector<ParamSpec>& specs);
// q/k/v/o projections (+ biases if attention_bias) under `prefix` = "model.layers.{i}.self_attn.".
void add_attention_specs(const io::HfConfig& cfg, const std::string& prefix, bool qk_norm,
                         std::vector<ParamSpec>& specs);
AttentionWeights bind_attention(const Params& p, const std::string& prefix, bool qk_norm, bool bias);
// The tensor `name` or an Error (kInternal: specs and binding disagree).
const at::Tensor& get(const Params& p, const std::string& name);
// Splits `prefix`+"experts.gate_up_proj" [E,2I,H] and "experts.down_proj" [E,H,I] (the
// transformers 5 in-memory layout) into per-expert tensors named by `expert_name(e, which)`
// with which in {gate, up, down}, keeping only `experts`. No-op if the fused names are absent.
void split_fused_experts(const std::string& prefix, ExpertRange experts,
                         std::string (*expert_name)(const std::string& prefix, int64_t e, int which),
                         Params& tensors);
// Removes per-expert tensors of experts outside `experts` (names prefix + "experts.{e}.").
void drop_remote_experts(const std::string& prefix, int64_t num_experts, ExpertRange experts,
                         Params& tensors);
std::string layer_prefix(int64_t layer);  // "model.layers.{i}."
// For every MoE layer's "{layer}{moe_prefix}": split fused experts, drop other ranks' experts.
void canonicalize_experts(const io::HfConfig& cfg, ExpertRange experts, const std::string& moe_prefix,
                          std::string (*expert_name)(const std::string& prefix, int64_t e, int which),
                          Params& tensors);

// "{prefix}experts.{e}.{gate,up,down}_proj.weight" for which = 0, 1, 2 (Qwen, DeepSeek names).
std::string proj_expert_name(const std::string& prefix, int64_t e, int which);
// {prefix}{gate,up,down}_proj.weight: one SwiGLU MLP of width I over hidden H.
void add_swiglu_specs(const std::string& prefix, int64_t H, int64_t I, std::vector<ParamSpec>& specs);
ExpertWeights bind_swiglu(const Params& p, const std::string& prefix);
// The local experts' gate/up/down, named by expert_name(prefix, e, which).
void add_expert_specs(const std::string& prefix, ExpertRange experts, int64_t H, int64_t I,
                      std::string (*expert_name)(const std::string& prefix, int64_t e, int which),
                      std::vector<ParamSpec>& specs);
std::vector<ExpertWeights> bind_experts(const Params& p, const std::string& prefix, ExpertRange experts,
                                        std::string (*expert_name)(const std::string& prefix, int64_t e, int which));
}  // namespace arch_util

}  // namespace moerl::model
