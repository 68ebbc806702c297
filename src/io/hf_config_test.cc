// HfConfig: both transformers naming generations, defaults, MoE layer placement, errors,
// and save -> parse round trip.

#include "io/hf_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "base/error.h"

namespace moerl::io {
namespace {

constexpr char kQwenV4[] = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
  "vocab_size": 151, "hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 32,
  "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
  "num_experts": 8, "num_experts_per_tok": 2, "norm_topk_prob": true,
  "decoder_sparse_step": 1, "mlp_only_layers": [1], "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0, "rope_scaling": null, "max_position_embeddings": 512,
  "tie_word_embeddings": true, "eos_token_id": 150, "bos_token_id": null,
  "torch_dtype": "bfloat16", "hidden_act": "silu"})";

constexpr char kQwenV5[] = R"({
  "model_type": "qwen3_moe",
  "vocab_size": 151, "hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 32,
  "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
  "num_local_experts": 8, "num_experts_per_tok": 2, "decoder_sparse_step": 2,
  "rope_parameters": {"rope_type": "default", "rope_theta": 5000.0},
  "eos_token_id": [149, 150], "dtype": "float32"})";

constexpr char kMixtral[] = R"({
  "model_type": "mixtral", "vocab_size": 100, "hidden_size": 48, "intermediate_size": 80,
  "num_hidden_layers": 3, "num_attention_heads": 6, "num_key_value_heads": 3,
  "num_local_experts": 4, "num_experts_per_tok": 2, "rope_theta": 1e6,
  "sliding_window": null})";

std::string error_of(const std::string& text) {
  try {
    HfConfig::parse(text, "cfg.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(HfConfig, ParsesTransformers4Names) {
  HfConfig c = HfConfig::parse(kQwenV4, "v4.json");
  EXPECT_EQ(c.model_type, "qwen3_moe");
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.moe_intermediate_size, 32);
  EXPECT_EQ(c.head_dim, 32);  // explicit, not hidden/heads = 16
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_id, 150);
  EXPECT_EQ(c.bos_token_id, -1);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_TRUE(c.is_moe_layer(0));
  EXPECT_FALSE(c.is_moe_layer(1));  // mlp_only_layers
  EXPECT_TRUE(c.is_moe_layer(2));
  EXPECT_TRUE(c.is_moe_layer(3));
}

TEST(HfConfig, ParsesTransformers5Names) {
  HfConfig c = HfConfig::parse(kQwenV5, "v5.json");
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_DOUBLE_EQ(c.rope_theta, 5000.0);
  EXPECT_EQ(c.head_dim, 16);                 // hidden / heads
  EXPECT_FALSE(c.norm_topk_prob);            // Qwen3MoeConfig default
  EXPECT_EQ(c.eos_token_id, 149);            // first of the list
  EXPECT_EQ(c.torch_dtype, "float32");
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  // decoder_sparse_step 2: layers 1 and 3 are sparse.
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
  EXPECT_FALSE(c.is_moe_layer(2));
  EXPECT_TRUE(c.is_moe_layer(3));
}

TEST(HfConfig, MixtralDefaults) {
  HfConfig c = HfConfig::parse(kMixtral, "mixtral.json");
  EXPECT_EQ(c.num_experts, 4);
  EXPECT_EQ(c.moe_intermediate_size, 80);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.eos_token_id, 2);
  EXPECT_EQ(c.sliding_window, 0);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(c.is_moe_layer(i));
}

TEST(HfConfig, SaveRoundTripsBothArchitectures) {
  for (const char* text : {kQwenV4, kQwenV5, kMixtral}) {
    HfConfig a = HfConfig::parse(text, "a.json");
    HfConfig b = HfConfig::parse(a.to_json(), "b.json");
    EXPECT_EQ(a.to_json(), b.to_json());
    EXPECT_EQ(b.num_experts, a.num_experts);
    EXPECT_EQ(b.mlp_only_layers, a.mlp_only_layers);
    EXPECT_EQ(b.head_dim, a.head_dim);
    EXPECT_EQ(b.norm_topk_prob, a.norm_topk_prob);
    EXPECT_DOUBLE_EQ(b.rope_theta, a.rope_theta);
  }
  HfConfig q = HfConfig::parse(kQwenV4, "q.json");
  EXPECT_NE(q.to_json().find("\"num_experts\": 8"), std::string::npos);
  EXPECT_NE(q.to_json().find("Qwen3MoeForCausalLM"), std::string::npos);
  HfConfig m = HfConfig::parse(kMixtral, "m.json");
  EXPECT_NE(m.to_json().find("\"num_local_experts\": 4"), std::string::npos);
  EXPECT_NE(m.to_json().find("MixtralForCausalLM"), std::string::npos);
}

TEST(HfConfig, SaveAndLoadFile) {
  std::string path = ::testing::TempDir() + "/moerl_io_" + std::to_string(::getpid()) + "_cfg_test.json";
  HfConfig a = HfConfig::parse(kMixtral, "m.json");
  a.save(path);
  HfConfig b = HfConfig::load(path);
  EXPECT_EQ(b.num_hidden_layers, 3);
  EXPECT_EQ(b.num_key_value_heads, 3);
  std::remove(path.c_str());
}

TEST(HfConfig, Errors) {
  std::string e = error_of(R"({"model_type": "llama", "vocab_size": 10})");
  EXPECT_NE(e.find("cfg.json"), std::string::npos) << e;
  EXPECT_NE(e.find("llama"), std::string::npos) << e;
  EXPECT_NE(e.find("HINT"), std::string::npos) << e;

  std::string missing = kMixtral;
  missing.replace(missing.find("\"hidden_size\": 48,"), 18, "");
  e = error_of(missing);
  EXPECT_NE(e.find("'hidden_size' is missing"), std::string::npos) << e;

  std::string no_experts = kMixtral;
  no_experts.replace(no_experts.find("\"num_local_experts\": 4,"), 23, "");
  e = error_of(no_experts);
  EXPECT_NE(e.find("num_local_experts"), std::string::npos) << e;

  std::string bad_type = kMixtral;
  bad_type.replace(bad_type.find("\"num_hidden_layers\": 3"), 22, "\"num_hidden_layers\": \"3\"");
  e = error_of(bad_type);
  EXPECT_NE(e.find("'num_hidden_layers' must be an integer"), std::string::npos) << e;

  std::string bad_kv = kMixtral;
  bad_kv.replace(bad_kv.find("\"num_key_value_heads\": 3"), 24, "\"num_key_value_heads\": 4");
  e = error_of(bad_kv);
  EXPECT_NE(e.find("num_key_value_heads=4 must divide num_attention_heads=6"), std::string::npos)
      << e;

  EXPECT_NE(error_of("[1, 2]").find("expected a JSON object"), std::string::npos);
  EXPECT_NE(error_of("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("{}").find("model_type"), std::string::npos);

  std::string yarn = kMixtral;
  yarn.replace(yarn.find("\"sliding_window\": null"), 22,
               "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}");
  e = error_of(yarn);
  EXPECT_NE(e.find("yarn"), std::string::npos) << e;

  try {
    HfConfig::load("/nonexistent/config.json");
    FAIL() << "no error";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::kNotFound);
  }
}

TEST(HfConfig, ConflictingExpertCounts) {
  std::string both = kQwenV5;
  both.replace(both.find("\"num_local_experts\": 8"), 22,
               "\"num_local_experts\": 8, \"num_experts\": 6");
  std::string e = error_of(both);
  EXPECT_NE(e.find("disagrees"), std::string::npos) << e;
}

}  // namespace
}  // namespace moerl::io
