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

// DeepSeek-V3's own config.json (transformers 4 names), sizes shrunk.
constexpr char kDeepseekV4[] = R"({
  "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
  "vocab_size": 1280, "hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 16,
  "num_hidden_layers": 5, "num_attention_heads": 4, "num_key_value_heads": 4,
  "n_routed_experts": 16, "n_shared_experts": 1, "num_experts_per_tok": 4,
  "n_group": 8, "topk_group": 4, "routed_scaling_factor": 2.5, "norm_topk_prob": true,
  "scoring_func": "sigmoid", "topk_method": "noaux_tc", "moe_layer_freq": 1,
  "first_k_dense_replace": 3, "q_lora_rank": 24, "kv_lora_rank": 16,
  "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8, "num_nextn_predict_layers": 1,
  "rope_theta": 10000, "max_position_embeddings": 163840,
  "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
                   "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096, "type": "yarn"},
  "rms_norm_eps": 1e-06, "tie_word_embeddings": false, "bos_token_id": 0, "eos_token_id": 1,
  "torch_dtype": "bfloat16", "hidden_act": "silu"})";

// Qwen1.5-MoE's config.json (transformers 4: no qkv_bias field, biases always on), shrunk.
constexpr char kQwen2V4[] = R"({
  "architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe",
  "vocab_size": 151, "hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 16,
  "shared_expert_intermediate_size": 48, "num_hidden_layers": 4, "num_attention_heads": 4,
  "num_key_value_heads": 4, "num_experts": 6, "num_experts_per_tok": 2, "norm_topk_prob": false,
  "decoder_sparse_step": 1, "rope_theta": 1000000.0, "use_sliding_window": false,
  "sliding_window": 32768, "max_window_layers": 21, "bos_token_id": 150, "eos_token_id": 150})";

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

TEST(HfConfig, DeepseekV3) {
  HfConfig c = HfConfig::parse(kDeepseekV4, "ds.json");
  EXPECT_TRUE(c.is_mla());
  EXPECT_EQ(c.num_experts, 16);
  EXPECT_EQ(c.q_lora_rank, 24);
  EXPECT_EQ(c.kv_lora_rank, 16);
  EXPECT_EQ(c.head_dim, 4);  // the RoPE width, as DeepseekV3Config sets it
  EXPECT_EQ(c.n_group, 8);
  EXPECT_EQ(c.topk_group, 4);
  EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 2.5);
  EXPECT_TRUE(c.rope_interleave);  // default
  EXPECT_EQ(c.rope_scaling.type, RopeType::kYarn);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 40);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(*c.rope_scaling.mscale_all_dim, 1.0);
  EXPECT_FALSE(c.rope_scaling.attention_factor.has_value());
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(c.is_moe_layer(i)) << i;  // first_k_dense_replace
  EXPECT_TRUE(c.is_moe_layer(3));
  EXPECT_TRUE(c.is_moe_layer(4));
  // Round trip, with the names transformers 4 and 5 read.
  HfConfig b = HfConfig::parse(c.to_json(), "b.json");
  EXPECT_EQ(b.to_json(), c.to_json());
  EXPECT_EQ(b.rope_scaling.original_max_position_embeddings, 4096);
  const std::string j = c.to_json();
  for (const char* key : {"\"n_routed_experts\": 16", "\"q_lora_rank\": 24", "\"rope_scaling\"",
                          "\"rope_type\": \"yarn\"", "DeepseekV3ForCausalLM"}) {
    EXPECT_NE(j.find(key), std::string::npos) << key << " in " << j;
  }
  // q_lora_rank null: a full-rank q_proj; and it survives the round trip as null.
  std::string null_q = kDeepseekV4;
  null_q.replace(null_q.find("\"q_lora_rank\": 24"), 17, "\"q_lora_rank\": null");
  HfConfig n = HfConfig::parse(null_q, "n.json");
  EXPECT_EQ(n.q_lora_rank, 0);
  EXPECT_NE(n.to_json().find("\"q_lora_rank\": null"), std::string::npos);
  EXPECT_EQ(HfConfig::parse(n.to_json(), "n2.json").q_lora_rank, 0);
}

TEST(HfConfig, DeepseekV3Errors) {
  auto with = [](const std::string& from, const std::string& to) {
    std::string t = kDeepseekV4;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return error_of(t.replace(at, from.size(), to));
  };
  EXPECT_NE(with("\"q_lora_rank\": 24,", "").find("'q_lora_rank' is missing"), std::string::npos);
  EXPECT_NE(with("\"kv_lora_rank\": 16,", "").find("'kv_lora_rank' is missing"), std::string::npos);
  EXPECT_NE(with("\"n_group\": 8", "\"n_group\": 3").find("n_group=3 must divide n_routed_experts=16"),
            std::string::npos);
  EXPECT_NE(with("\"topk_group\": 4", "\"topk_group\": 9").find("topk_group=9"), std::string::npos);
  EXPECT_NE(with("\"topk_group\": 4", "\"topk_group\": 1").find("exceeds the experts of topk_group=1"),
            std::string::npos);  // 4 experts from one group of 2
  EXPECT_NE(with("\"scoring_func\": \"sigmoid\"", "\"scoring_func\": \"softmax\"").find("scoring_func"),
            std::string::npos);
  EXPECT_NE(with("\"num_key_value_heads\": 4", "\"num_key_value_heads\": 2").find("num_key_value_heads=2"),
            std::string::npos);
  EXPECT_NE(with("\"qk_rope_head_dim\": 4", "\"qk_rope_head_dim\": 3").find("qk_rope_head_dim=3"),
            std::string::npos);
  EXPECT_NE(with("\"factor\": 40", "\"factor\": 0").find("'factor'"), std::string::npos);
  EXPECT_NE(with("\"type\": \"yarn\"", "\"type\": \"linear\"").find("'linear'"), std::string::npos);
  EXPECT_NE(with("\"first_k_dense_replace\": 3", "\"first_k_dense_replace\": 6").find("first_k_dense_replace=6"),
            std::string::npos);
  EXPECT_NE(with("\"moe_layer_freq\": 1", "\"moe_layer_freq\": 2").find("moe_layer_freq"), std::string::npos);
}

TEST(HfConfig, Qwen2Moe) {
  HfConfig c = HfConfig::parse(kQwen2V4, "q2.json");
  EXPECT_EQ(c.model_type, "qwen2_moe");
  EXPECT_TRUE(c.attention_bias);  // transformers 4 hard-wires q/k/v biases
  EXPECT_EQ(c.shared_expert_intermediate_size, 48);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_FALSE(c.norm_topk_prob);
  HfConfig b = HfConfig::parse(c.to_json(), "b.json");
  EXPECT_EQ(b.to_json(), c.to_json());
  EXPECT_NE(c.to_json().find("\"qkv_bias\": true"), std::string::npos);
  EXPECT_EQ(c.to_json().find("\"head_dim\""), std::string::npos);  // not a Qwen2MoeConfig field

  std::string no_bias = kQwen2V4;
  no_bias.replace(no_bias.find("\"norm_topk_prob\""), 16, "\"qkv_bias\": false, \"norm_topk_prob\"");
  EXPECT_FALSE(HfConfig::parse(no_bias, "nb.json").attention_bias);
  std::string sliding = kQwen2V4;
  sliding.replace(sliding.find("\"use_sliding_window\": false"), 27, "\"use_sliding_window\": true");
  EXPECT_NE(error_of(sliding).find("use_sliding_window"), std::string::npos);
  std::string no_shared = kQwen2V4;
  no_shared.replace(no_shared.find("\"shared_expert_intermediate_size\": 48,"), 38, "");
  EXPECT_NE(error_of(no_shared).find("'shared_expert_intermediate_size' is missing"), std::string::npos);
  std::string yarn = kQwen2V4;
  yarn.replace(yarn.find("\"rope_theta\""), 12, "\"rope_scaling\": {\"type\": \"yarn\", \"factor\": 2}, \"rope_theta\"");
  EXPECT_NE(error_of(yarn).find("yarn"), std::string::npos);
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
