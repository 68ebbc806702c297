// Helpers for the model tests: fixture paths, tiny configs, tensor comparisons.
#pragma once

#include <ATen/ATen.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "io/hf_config.h"
#include "model/model.h"

namespace moerl::model::testing {

inline std::string source_dir() {
  const char* s = std::getenv("MOERL_SOURCE_DIR");
  return s ? s : ".";
}

inline std::string fixture_dir(const std::string& name) { return source_dir() + "/tests/fixtures/" + name; }

inline double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// Logits of our model and of transformers agree to 1e-4 on the fixtures (Parity tests).
inline constexpr double kLogitTol = 1e-4;

// Greedy ids (prompt + continuation, [B, T+N]) against a reference committed from another
// library on another machine. Exact, except where the reference's choice is a near-tie: at
// the first position a row differs, the reference token's logit must be within rounding
// (2 x kLogitTol) of our top logit there, given the same prefix; that row's continuations
// then diverge and are not compared. Any other difference fails.
inline void expect_greedy_matches(Model& m, const at::Tensor& got, const at::Tensor& want, int64_t prompt_len,
                                  const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  for (int64_t b = 0; b < want.size(0); ++b) {
    for (int64_t t = prompt_len; t < want.size(1); ++t) {
      const int64_t ours = got[b][t].item<int64_t>(), theirs = want[b][t].item<int64_t>();
      if (ours == theirs) continue;
      at::Tensor logits = m.forward({.input_ids = want.slice(0, b, b + 1).slice(1, 0, t)}).logits_BTV[0][t - 1];
      const double gap = logits[ours].item<double>() - logits[theirs].item<double>();
      EXPECT_LE(gap, 2 * kLogitTol) << what << " row " << b << " step " << t - prompt_len << ": token " << ours
                                    << " vs reference " << theirs << " is no near-tie (logit gap " << gap << ")";
      break;
    }
  }
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
