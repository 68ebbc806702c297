// HfConfig: parse, validate and write Hugging Face config.json for qwen3_moe and mixtral.
// Reads the transformers 4.x names and the 5.x ones; defaults follow the transformers
// config classes so a sparse config.json means what it means in transformers.

#include "io/hf_config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/files.h"

namespace moerl::io {
namespace {

using nlohmann::json;

// Reads typed fields from one config object; every error names the file and field.
class FieldReader {
 public:
  FieldReader(const json& j, std::string source) : j_(j), source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what,
                         const std::string& hint) const {
    throw Error(source_ + ": field '" + field + "' " + what, hint);
  }

  // nullptr when absent or JSON null (transformers treats null as "use the default").
  const json* find(const std::string& field) const {
    auto it = j_.find(field);
    if (it == j_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  int64_t integer_value(const std::string& field, const json& v) const {
    if (v.is_number_integer() || v.is_number_unsigned()) {
      if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) {
        fail(field, "is " + v.dump() + ", too large", "use a value below 2^63");
      }
      return v.get<int64_t>();
    }
    // Some exporters write 4096.0; accept floats that are whole numbers.
    if (v.is_number_float()) {
      double d = v.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) return int64_t(d);
    }
    fail(field, "must be an integer, got " + v.dump(), "write it as a whole number, e.g. 8");
  }

  int64_t integer(const std::string& field, int64_t fallback) const {
    const json* v = find(field);
    return v ? integer_value(field, *v) : fallback;
  }

  int64_t required_integer(const std::string& field, const std::string& hint) const {
    const json* v = find(field);
    if (v == nullptr) fail(field, "is missing (required)", hint);
    return integer_value(field, *v);
  }

  double number(const std::string& field, double fallback) const {
    const json* v = find(field);
    if (v == nullptr) return fallback;
    if (!v->is_number()) fail(field, "must be a number, got " + v->dump(), "e.g. 1e-6");
    return v->get<double>();
  }

  bool boolean(const std::string& field, bool fallback) const {
    const json* v = find(field);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) fail(field, "must be true or false, got " + v->dump(), "use true or false");
    return v->get<bool>();
  }

  std::string string(const std::string& field, const std::string& fallback) const {
    const json* v = find(field);
    if (v == nullptr) return fallback;
    if (!v->is_string()) fail(field, "must be a string, got " + v->dump(), "quote it");
    return v->get<std::string>();
  }

  // An int, or a list of ints (eos_token_id); a list yields its first element.
  // Absent: the class default; explicit null: no such token (-1), as in transformers.
  int64_t token_id(const std::string& field, int64_t fallback) const {
    if (j_.find(field) == j_.end()) return fallback;
    const json* v = find(field);
    if (v == nullptr) return -1;
    if (v->is_array()) {
      if (v->empty()) return -1;
      return integer_value(field, (*v)[0]);
    }
    return integer_value(field, *v);
  }

  std::vector<int64_t> integer_list(const std::string& field) const {
    const json* v = find(field);
    std::vector<int64_t> out;
    if (v == nullptr) return out;
    if (!v->is_array()) fail(field, "must be a list of integers, got " + v->dump(), "e.g. [0, 3]");
    for (const json& e : *v) out.push_back(integer_value(field, e));
    return out;
  }

  const std::string& source() const { return source_; }

 private:
  const json& j_;
  std::string source_;
};

// Expert count: transformers 4 writes num_experts (qwen3_moe) / num_local_experts
// (mixtral); transformers 5 writes num_local_experts for both.
int64_t read_num_experts(const FieldReader& r, const std::string& preferred,
                         const std::string& other) {
  const json* a = r.find(preferred);
  const json* b = r.find(other);
  if (a == nullptr && b == nullptr) {
    r.fail(preferred, "is missing (required; '" + other + "' is also accepted)",
           "set the number of experts per MoE layer, e.g. \"" + preferred + "\": 8");
  }
  int64_t na = a ? r.integer_value(preferred, *a) : -1;
  int64_t nb = b ? r.integer_value(other, *b) : -1;
  if (a && b && na != nb) {
    r.fail(preferred, "= " + std::to_string(na) + " disagrees with '" + other + "' = " +
                          std::to_string(nb),
           "keep one of the two fields");
  }
  return a ? na : nb;
}

// rope_theta (4.x) or rope_parameters.rope_theta (5.x); only default RoPE is supported.
double read_rope_theta(const FieldReader& r, double fallback) {
  double theta = r.number("rope_theta", fallback);
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    const json* p = r.find(key);
    if (p == nullptr) continue;
    if (!p->is_object()) r.fail(key, "must be an object or null, got " + p->dump(), "remove it");
    std::string type = "default";
    for (const char* tkey : {"rope_type", "type"}) {
      auto it = p->find(tkey);
      if (it != p->end() && it->is_string()) type = it->get<std::string>();
    }
    if (type != "default") {
      r.fail(key, "asks for RoPE type '" + type + "', which moerl does not implement",
             "only default RoPE (rope_type \"default\") is supported");
    }
    auto it = p->find("rope_theta");
    if (it != p->end() && !it->is_null()) {
      if (!it->is_number()) r.fail(std::string(key) + ".rope_theta", "must be a number", "e.g. 1e6");
      theta = it->get<double>();
    }
  }
  return theta;
}

}  // namespace

bool HfConfig::is_moe_layer(int64_t i) const {
  if (model_type == "mixtral") return num_experts > 0;
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), i) != mlp_only_layers.end()) {
    return false;
  }
  return num_experts > 0 && decoder_sparse_step > 0 && (i + 1) % decoder_sparse_step == 0;
}

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
           "set \"model_type\": \"qwen3_moe\" or \"mixtral\"");
  }
  const bool qwen = c.model_type == "qwen3_moe";
  const bool mixtral = c.model_type == "mixtral";
  if (!qwen && !mixtral) {
    r.fail("model_type", "is '" + c.model_type + "', an architecture moerl does not implement",
           "supported model_type values: qwen3_moe, mixtral");
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

  if (qwen) {
    c.moe_intermediate_size = r.required_integer("moe_intermediate_size", hint_size);
    c.num_experts = read_num_experts(r, "num_experts", "num_local_experts");
    c.norm_topk_prob = r.boolean("norm_topk_prob", false);
    c.decoder_sparse_step = r.integer("decoder_sparse_step", 1);
    c.mlp_only_layers = r.integer_list("mlp_only_layers");
    c.rms_norm_eps = r.number("rms_norm_eps", 1e-6);
    c.rope_theta = read_rope_theta(r, 10000.0);
    c.max_position_embeddings = r.integer("max_position_embeddings", 32768);
    c.attention_bias = r.boolean("attention_bias", false);
    c.bos_token_id = r.token_id("bos_token_id", -1);
    c.eos_token_id = r.token_id("eos_token_id", -1);
    if (r.boolean("use_sliding_window", false)) c.sliding_window = r.integer("sliding_window", 4096);
  } else {
    c.moe_intermediate_size = c.intermediate_size;
    c.num_experts = read_num_experts(r, "num_local_experts", "num_experts");
    c.norm_topk_prob = true;
    c.decoder_sparse_step = 1;
    c.rms_norm_eps = r.number("rms_norm_eps", 1e-5);
    c.rope_theta = read_rope_theta(r, 1e6);
    c.max_position_embeddings = r.integer("max_position_embeddings", 4096 * 32);
    c.attention_bias = false;
    c.bos_token_id = r.token_id("bos_token_id", 1);
    c.eos_token_id = r.token_id("eos_token_id", 2);
    c.sliding_window = r.integer("sliding_window", 0);
  }
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
  const bool qwen = model_type == "qwen3_moe";
  j["model_type"] = model_type;
  j["architectures"] = {qwen ? "Qwen3MoeForCausalLM" : "MixtralForCausalLM"};
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["num_key_value_heads"] = num_key_value_heads;
  j["head_dim"] = head_dim;
  j["hidden_act"] = "silu";
  j["num_experts_per_tok"] = num_experts_per_tok;
  if (qwen) {
    j["num_experts"] = num_experts;
    j["moe_intermediate_size"] = moe_intermediate_size;
    j["norm_topk_prob"] = norm_topk_prob;
    j["decoder_sparse_step"] = decoder_sparse_step;
    j["mlp_only_layers"] = mlp_only_layers;
    j["attention_bias"] = attention_bias;
    j["use_sliding_window"] = sliding_window > 0;
    if (sliding_window > 0) j["sliding_window"] = sliding_window;
  } else {
    j["num_local_experts"] = num_experts;
    j["sliding_window"] = sliding_window > 0 ? json(sliding_window) : json(nullptr);
  }
  j["rms_norm_eps"] = rms_norm_eps;
  // 4.x reads rope_theta; 5.x reads rope_parameters (and converts rope_theta too).
  j["rope_theta"] = rope_theta;
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", rope_theta}};
  j["max_position_embeddings"] = max_position_embeddings;
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["router_aux_loss_coef"] = router_aux_loss_coef;
  auto id_or_null = [](int64_t id) { return id >= 0 ? json(id) : json(nullptr); };
  j["bos_token_id"] = id_or_null(bos_token_id);
  j["eos_token_id"] = id_or_null(eos_token_id);
  j["pad_token_id"] = id_or_null(pad_token_id);
  j["torch_dtype"] = torch_dtype;
  j["dtype"] = torch_dtype;
  return j.dump(2) + "\n";
}

void HfConfig::save(const std::string& path) const {
  validate(path);
  write_file_atomic(path, to_json());
}

}  // namespace moerl::io
