// Hugging Face `config.json` for the MoE architectures moerl runs. Parses both the
// transformers 4.x field names and the 5.x ones (num_local_experts, rope_parameters).
// Unknown model_type or a missing required field is an Error naming the file and field.
//
//   HfConfig c = HfConfig::load("ckpt/config.json");
//   c.save("out/config.json");   // writes the names transformers reads back
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moerl::io {

struct HfConfig {
  std::string model_type;              // "qwen3_moe" | "mixtral"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;       // dense MLP width (qwen3_moe dense layers; mixtral experts)
  int64_t moe_intermediate_size = 0;   // expert width (qwen3_moe); = intermediate_size for mixtral
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;                // default hidden_size / num_attention_heads
  int64_t num_experts = 0;             // num_experts | num_local_experts
  int64_t num_experts_per_tok = 0;
  bool norm_topk_prob = true;          // mixtral: always renormalises (true)
  int64_t decoder_sparse_step = 1;     // qwen3_moe: layer i is sparse if (i+1) % step == 0
  std::vector<int64_t> mlp_only_layers;  // qwen3_moe: these layers use a dense MLP
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;         // rope_theta | rope_parameters.rope_theta
  int64_t max_position_embeddings = 4096;
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  double router_aux_loss_coef = 0.001;
  int64_t bos_token_id = -1;
  int64_t eos_token_id = -1;
  int64_t pad_token_id = -1;
  std::string torch_dtype = "float32";    // torch_dtype | dtype (transformers 5)
  int64_t sliding_window = 0;          // 0 = full attention (mixtral sliding_window; qwen3_moe
                                       // only when use_sliding_window is true)

  // True if layer `i` uses the MoE block (else a dense SwiGLU MLP).
  bool is_moe_layer(int64_t i) const;

  static HfConfig load(const std::string& path);
  static HfConfig parse(const std::string& json_text, const std::string& source_name);
  std::string to_json() const;
  void save(const std::string& path) const;
  // Checks divisibility and ranges; Error names every value involved.
  void validate(const std::string& source_name) const;
};

}  // namespace moerl::io
