#include "model/tokenizer/json_util.h"

#include <fstream>
#include <sstream>

#include "base/error.h"

namespace moerl::model::hf {

void bad_json(const JsonPlace& at, const std::string& what) {
  throw Error(at.where() + ": " + what,
              "the file should be a Hugging Face tokenizer file as `tokenizers` writes it (docs/formats/tokenizer.md)");
}

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot read " + path, "check the path and its permissions", ErrorCode::kNotFound);
  std::stringstream ss;
  ss << f.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(path + ": not valid JSON (" + e.what() + ")", "the file is damaged or truncated; fetch it again");
  }
}

const nlohmann::json& object_field(const nlohmann::json& obj, const std::string& key, const JsonPlace& at) {
  auto it = obj.find(key);
  if (it == obj.end()) bad_json(at, "missing field \"" + key + "\"");
  return *it;
}

std::string string_field(const nlohmann::json& obj, const std::string& key, const JsonPlace& at) {
  const nlohmann::json& v = object_field(obj, key, at);
  if (!v.is_string()) bad_json(at.child(key), "expected a string, found " + v.dump());
  return v.get<std::string>();
}

std::string string_field_or(const nlohmann::json& obj, const std::string& key, const JsonPlace& at,
                            const std::string& fallback) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_string()) bad_json(at.child(key), "expected a string or null, found " + it->dump());
  return it->get<std::string>();
}

bool bool_field_or(const nlohmann::json& obj, const std::string& key, const JsonPlace& at, bool fallback) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) bad_json(at.child(key), "expected true or false, found " + it->dump());
  return it->get<bool>();
}

int64_t int_field(const nlohmann::json& obj, const std::string& key, const JsonPlace& at) {
  const nlohmann::json& v = object_field(obj, key, at);
  if (!v.is_number_integer()) bad_json(at.child(key), "expected an integer, found " + v.dump());
  return v.get<int64_t>();
}

std::string component_type(const nlohmann::json& obj, const JsonPlace& at) {
  if (!obj.is_object()) bad_json(at, "expected an object with a \"type\", found " + obj.dump().substr(0, 80));
  return string_field(obj, "type", at);
}

void unsupported_component(const JsonPlace& at, const std::string& type, const std::string& supported) {
  throw Error(at.where() + ": type \"" + type + "\" is not supported (supported: " + supported + ")",
              "moerl reads the BPE tokenizers of Qwen2/3, DeepSeek-V3, Llama and Mixtral; see "
              "docs/formats/tokenizer.md for the components it knows");
}

}  // namespace moerl::model::hf
