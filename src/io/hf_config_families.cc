// The per-architecture parts of config.json: field names, transformers' defaults, RoPE
// scaling, and the MLA / routing fields of deepseek_v3. One parse, validate and write block
// per model_type; hf_config.cc holds what every architecture shares.
#include <algorithm>
#include <cmath>

#include "io/hf_config_reader.h"

namespace moerl::io {

namespace detail {
namespace {

bool is(const HfConfig& c, const char* type) { return c.model_type == type; }

[[noreturn]] void invalid(const std::string& source, const std::string& what, const std::string& hint) {
  throw Error(source + ": " + what, hint);
}

// rope_theta plus rope_parameters (5.x) / rope_scaling (4.x; wins when both are set, as in
// transformers 5). Only deepseek_v3 may ask for YaRN; every other type is an Error.
void read_rope(const FieldReader& r, HfConfig& c, double fallback_theta, bool allow_yarn) {
  c.rope_theta = r.number("rope_theta", fallback_theta);
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    const json* p = r.find(key);
    if (p == nullptr) continue;
    if (!p->is_object()) r.fail(key, "must be an object or null, got " + p->dump(), "remove it");
    FieldReader sub(*p, r.source() + ": " + key);
    std::string type = sub.string("rope_type", sub.string("type", "default"));
    if (type == "yarn" && allow_yarn) {
      RopeScaling& s = c.rope_scaling;
      s.type = RopeType::kYarn;
      s.factor = sub.number("factor", 0.0);
      if (!(s.factor > 0)) {
        sub.fail("factor", "is missing or not > 0 (YaRN needs its context extension factor)", "e.g. \"factor\": 40");
      }
      // NOTE: c.max_position_embeddings is read before this (transformers' default here).
      s.original_max_position_embeddings =
          sub.integer("original_max_position_embeddings", c.max_position_embeddings);
      // NOTE: transformers reads `beta_fast or 32`, `beta_slow or 1`: 0 means the default.
      const double bf = sub.number("beta_fast", 0.0), bs = sub.number("beta_slow", 0.0);
      s.beta_fast = bf != 0 ? bf : 32.0;
      s.beta_slow = bs != 0 ? bs : 1.0;
      s.mscale = sub.optional_number("mscale");
      s.mscale_all_dim = sub.optional_number("mscale_all_dim");
      s.attention_factor = sub.optional_number("attention_factor");
      s.truncate = sub.boolean("truncate", true);
    } else if (type != "default") {
      r.fail(key, "asks for RoPE type '" + type + "', which moerl does not implement for " + c.model_type,
             allow_yarn ? "use rope_type \"default\" or \"yarn\""
                        : "only default RoPE (rope_type \"default\") is supported for this architecture");
    } else {
      c.rope_scaling = RopeScaling{};
    }
    auto it = p->find("rope_theta");
    if (it != p->end() && !it->is_null()) {
      if (!it->is_number()) r.fail(std::string(key) + ".rope_theta", "must be a number", "e.g. 1e6");
      c.rope_theta = it->get<double>();
    }
  }
}

json rope_parameters_json(const HfConfig& c) {
  const RopeScaling& s = c.rope_scaling;
  json p = {{"rope_type", s.type == RopeType::kYarn ? "yarn" : "default"}, {"rope_theta", c.rope_theta}};
  if (s.type == RopeType::kYarn) {
    p["factor"] = s.factor;
    p["original_max_position_embeddings"] = s.original_max_position_embeddings;
    p["beta_fast"] = s.beta_fast;
    p["beta_slow"] = s.beta_slow;
    if (s.mscale) p["mscale"] = *s.mscale;
    if (s.mscale_all_dim) p["mscale_all_dim"] = *s.mscale_all_dim;
    if (s.attention_factor) p["attention_factor"] = *s.attention_factor;
    if (!s.truncate) p["truncate"] = false;
  }
  return p;
}

void parse_qwen_common(const FieldReader& r, HfConfig& c, const std::string& hint_size) {
  c.moe_intermediate_size = r.required_integer("moe_intermediate_size", hint_size);
  c.num_experts = read_num_experts(r, "num_experts", "num_local_experts");
  c.norm_topk_prob = r.boolean("norm_topk_prob", false);
  c.decoder_sparse_step = r.integer("decoder_sparse_step", 1);
  c.mlp_only_layers = r.integer_list("mlp_only_layers");
  c.rms_norm_eps = r.number("rms_norm_eps", 1e-6);
  read_rope(r, c, 10000.0, /*allow_yarn=*/false);
  c.max_position_embeddings = r.integer("max_position_embeddings", 32768);
  c.bos_token_id = r.token_id("bos_token_id", -1);
  c.eos_token_id = r.token_id("eos_token_id", -1);
}

void parse_deepseek_v3(const FieldReader& r, HfConfig& c, const std::string& hint_size) {
  c.moe_intermediate_size = r.required_integer("moe_intermediate_size", hint_size);
  c.num_experts = read_num_experts(r, "n_routed_experts", "num_local_experts");
  if (!r.has("q_lora_rank")) {
    r.fail("q_lora_rank", "is missing (required: an integer, or null for a full-rank q_proj)", hint_size);
  }
  c.q_lora_rank = r.integer("q_lora_rank", 0);
  c.kv_lora_rank = r.required_integer("kv_lora_rank", hint_size);
  c.qk_nope_head_dim = r.required_integer("qk_nope_head_dim", hint_size);
  c.qk_rope_head_dim = r.required_integer("qk_rope_head_dim", hint_size);
  c.v_head_dim = r.required_integer("v_head_dim", hint_size);
  c.head_dim = c.qk_rope_head_dim;  // as DeepseekV3Config: the RoPE width
  c.rope_interleave = r.boolean("rope_interleave", true);
  c.n_shared_experts = r.integer("n_shared_experts", 1);
  c.n_group = r.integer("n_group", 8);
  c.topk_group = r.integer("topk_group", 4);
  c.routed_scaling_factor = r.number("routed_scaling_factor", 2.5);
  c.first_k_dense_replace = r.integer("first_k_dense_replace", 3);
  c.norm_topk_prob = r.boolean("norm_topk_prob", true);
  c.attention_bias = r.boolean("attention_bias", false);
  c.rms_norm_eps = r.number("rms_norm_eps", 1e-6);
  c.max_position_embeddings = r.integer("max_position_embeddings", 4096);
  read_rope(r, c, 10000.0, /*allow_yarn=*/true);
  c.bos_token_id = r.token_id("bos_token_id", 0);
  c.eos_token_id = r.token_id("eos_token_id", 1);
  // Fields of DeepSeek's own config that transformers ignores: accept only the values its
  // modeling code hard-wires, so a variant that means something else is not run silently.
  const std::pair<const char*, const char*> fixed[] = {{"scoring_func", "sigmoid"}, {"topk_method", "noaux_tc"}};
  for (auto [field, want] : fixed) {
    const std::string v = r.string(field, want);
    if (v != want) {
      r.fail(field, "is '" + v + "'; deepseek_v3 routing here is " + want,
             "this looks like another DeepSeek variant (deepseek_v2?), which moerl does not implement");
    }
  }
  if (r.integer("moe_layer_freq", 1) != 1) {
    r.fail("moe_layer_freq", "must be 1 (every layer from first_k_dense_replace on is MoE)",
           "transformers' DeepseekV3 ignores this field; other values are not supported");
  }
}

}  // namespace

int64_t read_num_experts(const FieldReader& r, const std::string& preferred, const std::string& other) {
  const json* a = r.find(preferred);
  const json* b = r.find(other);
  if (a == nullptr && b == nullptr) {
    r.fail(preferred, "is missing (required; '" + other + "' is also accepted)",
           "set the number of experts per MoE layer, e.g. \"" + preferred + "\": 8");
  }
  int64_t na = a ? r.integer_value(preferred, *a) : -1;
  int64_t nb = b ? r.integer_value(other, *b) : -1;
  if (a && b && na != nb) {
    r.fail(preferred, "= " + std::to_string(na) + " disagrees with '" + other + "' = " + std::to_string(nb),
           "keep one of the two fields");
  }
  return a ? na : nb;
}

bool is_known_model_type(const std::string& t) {
  return t == "qwen3_moe" || t == "qwen2_moe" || t == "mixtral" || t == "deepseek_v3";
}

void parse_family(const FieldReader& r, HfConfig& c) {
  const std::string hint_size = "copy it from the model's config.json on the Hugging Face Hub";
  if (is(c, "qwen3_moe")) {
    parse_qwen_common(r, c, hint_size);
    c.attention_bias = r.boolean("attention_bias", false);
    if (r.boolean("use_sliding_window", false)) c.sliding_window = r.integer("sliding_window", 4096);
  } else if (is(c, "qwen2_moe")) {
    parse_qwen_common(r, c, hint_size);
    c.shared_expert_intermediate_size = r.required_integer("shared_expert_intermediate_size", hint_size);
    // transformers 4 hard-wires the q/k/v biases; 5 calls the switch qkv_bias (default true).
    c.attention_bias = r.boolean("qkv_bias", true);
    if (r.boolean("use_sliding_window", false)) {
      r.fail("use_sliding_window", "is true; moerl does not implement sliding-window attention",
             "set \"use_sliding_window\": false (the Qwen1.5/Qwen2 MoE checkpoints do)");
    }
  } else if (is(c, "mixtral")) {
    c.moe_intermediate_size = c.intermediate_size;
    c.num_experts = read_num_experts(r, "num_local_experts", "num_experts");
    c.norm_topk_prob = true;
    c.decoder_sparse_step = 1;
    c.rms_norm_eps = r.number("rms_norm_eps", 1e-5);
    read_rope(r, c, 1e6, /*allow_yarn=*/false);
    c.max_position_embeddings = r.integer("max_position_embeddings", 4096 * 32);
    c.attention_bias = false;
    c.bos_token_id = r.token_id("bos_token_id", 1);
    c.eos_token_id = r.token_id("eos_token_id", 2);
    c.sliding_window = r.integer("sliding_window", 0);
  } else {
    parse_deepseek_v3(r, c, hint_size);
  }
}

void validate_family(const HfConfig& c, const std::string& src) {
  auto num = [](int64_t v) { return std::to_string(v); };
  const RopeScaling& rs = c.rope_scaling;
  if (rs.type == RopeType::kYarn) {
    if (!c.is_mla()) {
      invalid(src, "rope_scaling asks for YaRN, which moerl implements for deepseek_v3 only",
              "use default RoPE for " + c.model_type);
    }
    if (!(rs.factor > 0) || rs.original_max_position_embeddings <= 0 || !(rs.beta_fast > 0) ||
        !(rs.beta_slow > 0)) {
      invalid(src,
              "YaRN rope_scaling needs factor > 0, original_max_position_embeddings > 0, beta_fast and beta_slow > 0 "
              "(got factor=" + std::to_string(rs.factor) + ", original_max_position_embeddings=" +
                  num(rs.original_max_position_embeddings) + ")",
              "copy rope_scaling from the model's config.json");
    }
  }
  if (is(c, "qwen2_moe") && c.shared_expert_intermediate_size <= 0) {
    invalid(src, "shared_expert_intermediate_size=" + num(c.shared_expert_intermediate_size) + " must be > 0",
            "qwen2_moe layers always hold a shared expert; copy its width from the model's config.json");
  }
  if (!c.is_mla()) return;
  if (c.q_lora_rank < 0 || c.kv_lora_rank <= 0 || c.qk_nope_head_dim < 0 || c.qk_rope_head_dim <= 0 ||
      c.v_head_dim <= 0 || c.qk_rope_head_dim % 2 != 0) {
    invalid(src,
            "MLA sizes q_lora_rank=" + num(c.q_lora_rank) + " (0 = null), kv_lora_rank=" + num(c.kv_lora_rank) +
                ", qk_nope_head_dim=" + num(c.qk_nope_head_dim) + ", qk_rope_head_dim=" + num(c.qk_rope_head_dim) +
                ", v_head_dim=" + num(c.v_head_dim) + " must be >= 0, > 0, >= 0, > 0 and even, > 0",
            "copy them from the model's config.json");
  }
  if (c.head_dim != c.qk_rope_head_dim) {
    invalid(src, "deepseek_v3 head_dim=" + num(c.head_dim) + " must equal qk_rope_head_dim=" + num(c.qk_rope_head_dim),
            "head_dim is the RoPE width in DeepseekV3Config");
  }
  if (c.num_key_value_heads != c.num_attention_heads) {
    invalid(src, "deepseek_v3 num_key_value_heads=" + num(c.num_key_value_heads) + " must equal num_attention_heads=" +
                     num(c.num_attention_heads),
            "MLA expands its latent to one key and value per query head");
  }
  if (c.attention_bias) {
    invalid(src, "deepseek_v3 attention_bias=true is not implemented", "use a checkpoint without attention biases");
  }
  if (c.n_group <= 0 || c.num_experts % c.n_group != 0 || c.num_experts / c.n_group < 2 || c.topk_group <= 0 ||
      c.topk_group > c.n_group) {
    invalid(src,
            "n_group=" + num(c.n_group) + " must divide n_routed_experts=" + num(c.num_experts) +
                " into groups of at least 2 experts, and topk_group=" + num(c.topk_group) + " must be in [1, n_group]",
            "the router ranks each group by the sum of its top-2 scores");
  }
  if (c.num_experts_per_tok > c.topk_group * (c.num_experts / c.n_group)) {
    invalid(src,
            "num_experts_per_tok=" + num(c.num_experts_per_tok) + " exceeds the experts of topk_group=" +
                num(c.topk_group) + " groups of " + num(c.num_experts / c.n_group),
            "raise topk_group or lower num_experts_per_tok");
  }
  if (!(c.routed_scaling_factor > 0) || !std::isfinite(c.routed_scaling_factor) || c.n_shared_experts < 0) {
    invalid(src,
            "routed_scaling_factor=" + std::to_string(c.routed_scaling_factor) + " must be > 0 and n_shared_experts=" +
                num(c.n_shared_experts) + " >= 0",
            "fix the value in config.json");
  }
  if (c.first_k_dense_replace < 0 || c.first_k_dense_replace > c.num_hidden_layers) {
    invalid(src,
            "first_k_dense_replace=" + num(c.first_k_dense_replace) + " must be in [0, num_hidden_layers=" +
                num(c.num_hidden_layers) + "]",
            "it counts the dense layers before the first MoE layer");
  }
}

void family_json(const HfConfig& c, json& j) {
  // 4.x reads rope_theta (+ rope_scaling); 5.x reads rope_parameters (and converts both).
  j["rope_theta"] = c.rope_theta;
  j["rope_parameters"] = rope_parameters_json(c);
  if (c.rope_scaling.type != RopeType::kDefault) {
    json s = rope_parameters_json(c);
    s.erase("rope_theta");
    j["rope_scaling"] = s;
  }
  if (is(c, "qwen3_moe") || is(c, "qwen2_moe")) {
    const bool q3 = is(c, "qwen3_moe");
    j["architectures"] = {q3 ? "Qwen3MoeForCausalLM" : "Qwen2MoeForCausalLM"};
    j["num_experts"] = c.num_experts;
    j["moe_intermediate_size"] = c.moe_intermediate_size;
    j["norm_topk_prob"] = c.norm_topk_prob;
    j["decoder_sparse_step"] = c.decoder_sparse_step;
    j["mlp_only_layers"] = c.mlp_only_layers;
    j["use_sliding_window"] = c.sliding_window > 0;
    if (c.sliding_window > 0) j["sliding_window"] = c.sliding_window;
    if (q3) {
      j["attention_bias"] = c.attention_bias;
    } else {
      j["qkv_bias"] = c.attention_bias;
      j["shared_expert_intermediate_size"] = c.shared_expert_intermediate_size;
      // Qwen2MoeConfig has no head_dim field: write it only when it is not hidden / heads.
      if (c.head_dim == c.hidden_size / c.num_attention_heads) j.erase("head_dim");
    }
  } else if (is(c, "mixtral")) {
    j["architectures"] = {"MixtralForCausalLM"};
    j["num_local_experts"] = c.num_experts;
    j["sliding_window"] = c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
  } else {
    j["architectures"] = {"DeepseekV3ForCausalLM"};
    j["n_routed_experts"] = c.num_experts;
    j["moe_intermediate_size"] = c.moe_intermediate_size;
    j["n_shared_experts"] = c.n_shared_experts;
    j["n_group"] = c.n_group;
    j["topk_group"] = c.topk_group;
    j["routed_scaling_factor"] = c.routed_scaling_factor;
    j["norm_topk_prob"] = c.norm_topk_prob;
    j["first_k_dense_replace"] = c.first_k_dense_replace;
    j["q_lora_rank"] = c.q_lora_rank > 0 ? json(c.q_lora_rank) : json(nullptr);
    j["kv_lora_rank"] = c.kv_lora_rank;
    j["qk_nope_head_dim"] = c.qk_nope_head_dim;
    j["qk_rope_head_dim"] = c.qk_rope_head_dim;
    j["v_head_dim"] = c.v_head_dim;
    j["rope_interleave"] = c.rope_interleave;
    j["attention_bias"] = false;
  }
}

}  // namespace detail

bool HfConfig::is_moe_layer(int64_t i) const {
  if (model_type == "mixtral") return num_experts > 0;
  if (model_type == "deepseek_v3") return num_experts > 0 && i >= first_k_dense_replace;
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), i) != mlp_only_layers.end()) {
    return false;
  }
  return num_experts > 0 && decoder_sparse_step > 0 && (i + 1) % decoder_sparse_step == 0;
}

}  // namespace moerl::io
