// Helpers for the model tests: fixture paths, tiny configs, tensor comparisons.
#pragma once

#include <ATen/ATen.h>

#include <cstdlib>
#include <string>

#include "io/hf_config.h"

namespace moerl::model::testing {

inline std::string source_dir() {
  const char* s = std::getenv("MOERL_SOURCE_DIR");
  return s ? s : ".";
}

inline std::string fixture_dir(const std::string& name) { return source_dir() + "/tests/fixtures/" + name; }

inline double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// A tiny qwen3_moe config: 2 layers (layer 1 dense unless `all_moe`), 8 experts top-2.
inline io::HfConfig tiny_qwen3(bool all_moe = false) {
  io::HfConfig c;
  c.model_type = "qwen3_moe";
  c.vocab_size = 50;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.moe_intermediate_size = 16;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.num_experts = 8;
  c.num_experts_per_tok = 2;
  c.norm_topk_prob = true;
  if (!all_moe) c.mlp_only_layers = {1};
  c.rope_theta = 10000.0;
  c.max_position_embeddings = 128;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  c.pad_token_id = 0;
  return c;
}

inline io::HfConfig tiny_mixtral() {
  io::HfConfig c = tiny_qwen3(true);
  c.model_type = "mixtral";
  c.intermediate_size = 24;
  c.moe_intermediate_size = 24;
  c.num_experts = 4;
  c.mlp_only_layers.clear();
  return c;
}

}  // namespace moerl::model::testing
