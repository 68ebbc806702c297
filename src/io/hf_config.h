// Hugging Face `config.json` for the MoE architectures moerl runs (qwen3_moe, qwen2_moe,
// mixtral, deepseek_v3). Parses both the transformers 4.x field names and the 5.x ones
// (num_local_experts, rope_parameters). Unknown model_type or a missing required field is an
// Error naming the file and field.
//
//   HfConfig c = HfConfig::load("ckpt/config.json");
//   c.save("out/config.json");   // writes the names transformers reads back
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moerl::io {

enum class RopeType {
  kDefault,  // inv_freq_j = theta^(-2j/D)
  kYarn,     // YaRN (deepseek_v3 only): interpolated frequencies + attention factor
};

// RoPE scaling: `rope_scaling` (transformers 4) or `rope_parameters` (5) beyond rope_theta.
// Fields keep transformers' meaning; optional ones are unset when the config omits them.
struct RopeScaling {
  RopeType type = RopeType::kDefault;
  double factor = 1.0;
  int64_t original_max_position_embeddings = 0;  // default: max_position_embeddings
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  std::optional<double> mscale, mscale_all_dim, attention_factor;
  bool truncate = true;
};

struct HfConfig {
  std::string model_type;              // "qwen3_moe" | "qwen2_moe" | "mixtral" | "deepseek_v3"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;       // dense MLP width (dense layers; mixtral experts)
  int64_t moe_intermediate_size = 0;   // expert width; = intermediate_size for mixtral
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;                // default hidden_size / num_attention_heads;
                                       // deepseek_v3: qk_rope_head_dim (the RoPE width)
  int64_t num_experts = 0;             // num_experts | num_local_experts | n_routed_experts
  int64_t num_experts_per_tok = 0;
  bool norm_topk_prob = true;          // mixtral: always renormalises (true)
  int64_t decoder_sparse_step = 1;     // qwen*_moe: layer i is sparse if (i+1) % step == 0
  std::vector<int64_t> mlp_only_layers;  // qwen*_moe: these layers use a dense MLP
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;         // rope_theta | rope_parameters.rope_theta
  RopeScaling rope_scaling;
  int64_t max_position_embeddings = 4096;
  bool tie_word_embeddings = false;
  bool attention_bias = false;         // q/k/v biases (qwen2_moe: qkv_bias, default true)
  double router_aux_loss_coef = 0.001;
  int64_t bos_token_id = -1;
  int64_t eos_token_id = -1;
  int64_t pad_token_id = -1;
  std::string torch_dtype = "float32";    // torch_dtype | dtype (transformers 5)
  int64_t sliding_window = 0;          // 0 = full attention (mixtral sliding_window; qwen3_moe
                                       // only when use_sliding_window is true)

  // qwen2_moe: one shared expert of this width beside the routed ones, gated by
  // sigmoid(shared_expert_gate(x)).
  int64_t shared_expert_intermediate_size = 0;

  // deepseek_v3: multi-head latent attention (MLA) ...
  int64_t q_lora_rank = 0;             // 0 = null: q_proj without a low-rank factorisation
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  bool rope_interleave = true;         // RoPE pairs are (x0,x1),(x2,x3)... in the rope part
  // ... and routing: sigmoid scores, group-limited top-k, shared experts, dense first layers.
  int64_t n_shared_experts = 0;        // shared expert width = moe_intermediate_size * this
  int64_t n_group = 1;
  int64_t topk_group = 1;
  double routed_scaling_factor = 1.0;
  int64_t first_k_dense_replace = 0;

  // True if layer `i` uses the MoE block (else a dense SwiGLU MLP).
  bool is_moe_layer(int64_t i) const;
  bool is_mla() const { return model_type == "deepseek_v3"; }

  static HfConfig load(const std::string& path);
  static HfConfig parse(const std::string& json_text, const std::string& source_name);
  std::string to_json() const;
  void save(const std::string& path) const;
  // Checks divisibility and ranges; Error names every value involved.
  void validate(const std::string& source_name) const;
};

}  // namespace moerl::io
