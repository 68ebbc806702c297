// HfConfig: parse, validate and write Hugging Face config.json. The fields every
// architecture shares are read and checked here; the per-architecture ones (names, defaults,
// RoPE scaling, MLA and routing fields) in hf_config_families.cc. Reads the transformers 4.x
// names and the 5.x ones; defaults follow the transformers config classes so a sparse
// config.json means what it means in transformers.

#include "io/hf_config.h"

#include <fstream>
#include <sstream>

#include "base/error.h"
#include "base/files.h"
#include "io/hf_config_reader.h"

namespace moerl::io {

using detail::FieldReader;
using detail::json;

HfConfig HfConfig::parse(const std::string& json_text, const std::string& source_name) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    throw Error(source_name + ": not valid JSON (" + e.what() + ")",
                "config.json must be the JSON object transformers writes with save_pretrained");
  }
  if (!j.is_object()) {
    throw Error(source_name + ": expected a JSON object, got " + std::string(j.type_name()),
                "config.json must be the JSON object transformers writes with save_pretrained");
  }
  FieldReader r(j, source_name);
  HfConfig c;
  c.model_type = r.string("model_type", "");
  if (c.model_type.empty()) {
    r.fail("model_type", "is missing (required)",
           "set \"model_type\": one of qwen3_moe, qwen2_moe, mixtral, deepseek_v3");
  }
  if (!detail::is_known_model_type(c.model_type)) {
    r.fail("model_type", "is '" + c.model_type + "', an architecture moerl does not implement",
           "supported model_type values: qwen3_moe, qwen2_moe, mixtral, deepseek_v3");
  }
  const std::string hint_size = "copy it from the model's config.json on the Hugging Face Hub";
  c.vocab_size = r.required_integer("vocab_size", hint_size);
  c.hidden_size = r.required_integer("hidden_size", hint_size);
  c.intermediate_size = r.required_integer("intermediate_size", hint_size);
  c.num_hidden_layers = r.required_integer("num_hidden_layers", hint_size);
  c.num_attention_heads = r.required_integer("num_attention_heads", hint_size);
  c.num_key_value_heads = r.integer("num_key_value_heads", c.num_attention_heads);
  c.num_experts_per_tok = r.required_integer("num_experts_per_tok", hint_size);
  c.head_dim = r.integer("head_dim", 0);
  if (c.head_dim == 0 && c.num_attention_heads > 0) {
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }

  std::string act = r.string("hidden_act", "silu");
  if (act != "silu") {
    r.fail("hidden_act", "is '" + act + "'; moerl's experts implement SwiGLU (silu) only",
           "use \"hidden_act\": \"silu\"");
  }
  detail::parse_family(r, c);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);
  c.router_aux_loss_coef = r.number("router_aux_loss_coef", 0.001);
  c.pad_token_id = r.token_id("pad_token_id", -1);
  // transformers 5 writes "dtype"; 4.x writes "torch_dtype".
  c.torch_dtype = r.string("dtype", r.string("torch_dtype", "float32"));
  c.validate(source_name);
  return c;
}

HfConfig HfConfig::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error("cannot open model config '" + path + "'",
                "pass the checkpoint directory that holds config.json (as save_pretrained writes it)",
                ErrorCode::kNotFound);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), path);
}

void HfConfig::validate(const std::string& source_name) const {
  auto positive = [&](const char* field, int64_t v) {
    if (v <= 0) {
      throw Error(source_name + ": " + field + "=" + std::to_string(v) + " must be > 0",
                  "fix the value in config.json");
    }
  };
  if (!detail::is_known_model_type(model_type)) {
    throw Error(source_name + ": model_type '" + model_type + "' is not an architecture moerl implements",
                "supported model_type values: qwen3_moe, qwen2_moe, mixtral, deepseek_v3");
  }
  // First: its messages name the architecture's own fields (qk_rope_head_dim, not head_dim).
  detail::validate_family(*this, source_name);
  positive("vocab_size", vocab_size);
  positive("hidden_size", hidden_size);
  positive("intermediate_size", intermediate_size);
  positive("moe_intermediate_size", moe_intermediate_size);
  positive("num_hidden_layers", num_hidden_layers);
  positive("num_attention_heads", num_attention_heads);
  positive("num_key_value_heads", num_key_value_heads);
  positive("head_dim", head_dim);
  positive("num_experts", num_experts);
  positive("num_experts_per_tok", num_experts_per_tok);
  positive("decoder_sparse_step", decoder_sparse_step);
  positive("max_position_embeddings", max_position_embeddings);
  if (num_attention_heads % num_key_value_heads != 0) {
    throw Error(source_name + ": num_key_value_heads=" + std::to_string(num_key_value_heads) +
                    " must divide num_attention_heads=" + std::to_string(num_attention_heads),
                "grouped-query attention shares each KV head among a whole number of heads");
  }
  if (num_experts_per_tok > num_experts) {
    throw Error(source_name + ": num_experts_per_tok=" + std::to_string(num_experts_per_tok) +
                    " exceeds num_experts=" + std::to_string(num_experts),
                "top-k cannot pick more experts than exist");
  }
  if (head_dim % 2 != 0) {
    throw Error(source_name + ": head_dim=" + std::to_string(head_dim) + " must be even",
                "RoPE rotates pairs of dimensions");
  }
  if (!(rms_norm_eps > 0) || !(rope_theta > 0)) {
    throw Error(source_name + ": rms_norm_eps=" + std::to_string(rms_norm_eps) +
                    " and rope_theta=" + std::to_string(rope_theta) + " must both be > 0",
                "fix the value in config.json");
  }
  for (int64_t layer : mlp_only_layers) {
    if (layer < 0 || layer >= num_hidden_layers) {
      throw Error(source_name + ": mlp_only_layers holds " + std::to_string(layer) +
                      ", outside [0, num_hidden_layers=" + std::to_string(num_hidden_layers) + ")",
                  "list layer indices from 0 to num_hidden_layers-1");
    }
  }
  for (auto [field, id] : {std::pair{"bos_token_id", bos_token_id}, {"eos_token_id", eos_token_id},
                           {"pad_token_id", pad_token_id}}) {
    if (id < -1 || id >= vocab_size) {
      throw Error(source_name + ": " + field + "=" + std::to_string(id) + " is outside [0, " +
                      "vocab_size=" + std::to_string(vocab_size) + ")",
                  "fix the token id or vocab_size");
    }
  }
  if (sliding_window < 0) {
    throw Error(source_name + ": sliding_window=" + std::to_string(sliding_window) + " must be >= 0",
                "use null for no sliding window");
  }
}

std::string HfConfig::to_json() const {
  json j;
  j["model_type"] = model_type;
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["num_key_value_heads"] = num_key_value_heads;
  j["head_dim"] = head_dim;
  j["hidden_act"] = "silu";
  j["num_experts_per_tok"] = num_experts_per_tok;
  j["rms_norm_eps"] = rms_norm_eps;
  j["max_position_embeddings"] = max_position_embeddings;
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["router_aux_loss_coef"] = router_aux_loss_coef;
  auto id_or_null = [](int64_t id) { return id >= 0 ? json(id) : json(nullptr); };
  j["bos_token_id"] = id_or_null(bos_token_id);
  j["eos_token_id"] = id_or_null(eos_token_id);
  j["pad_token_id"] = id_or_null(pad_token_id);
  j["torch_dtype"] = torch_dtype;
  j["dtype"] = torch_dtype;
  detail::family_json(*this, j);
  return j.dump(2) + "\n";
}

void HfConfig::save(const std::string& path) const {
  validate(path);
  write_file_atomic(path, to_json());
}

}  // namespace moerl::io
