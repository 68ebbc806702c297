// Reading tokenizer.json and its companion files: every error names the file and the JSON
// path of the offending value ("tokenizer.json: model.merges[12]: ...").
//
//   JsonPlace at{"/m/tokenizer.json", "pre_tokenizer"};
//   const std::string& type = string_field(j, "type", at);
//   bool isolated = bool_field(j, "invert", at.child("invert"), false);
//
// Stateless; thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace moerl::model::hf {

struct JsonPlace {
  std::string file;  // path of the file
  std::string path;  // JSON path inside it, "" for the root

  JsonPlace child(const std::string& key) const { return {file, path.empty() ? key : path + "." + key}; }
  JsonPlace index(size_t i) const { return {file, path + "[" + std::to_string(i) + "]"}; }
  // "FILE: PATH" (or "FILE" at the root), the prefix of every message.
  std::string where() const { return path.empty() ? file : file + ": " + path; }
};

// Throws moerl::Error "WHERE: WHAT" with a hint about the tokenizer.json format.
[[noreturn]] void bad_json(const JsonPlace& at, const std::string& what);

// Parses a whole file; a missing or malformed file is an Error naming it.
nlohmann::json read_json_file(const std::string& path);

const nlohmann::json& object_field(const nlohmann::json& obj, const std::string& key, const JsonPlace& at);
std::string string_field(const nlohmann::json& obj, const std::string& key, const JsonPlace& at);
// Optional fields: `fallback` when absent or null.
std::string string_field_or(const nlohmann::json& obj, const std::string& key, const JsonPlace& at,
                            const std::string& fallback);
bool bool_field_or(const nlohmann::json& obj, const std::string& key, const JsonPlace& at, bool fallback);
int64_t int_field(const nlohmann::json& obj, const std::string& key, const JsonPlace& at);
// The "type" of a component, checked against the kinds a reader supports.
std::string component_type(const nlohmann::json& obj, const JsonPlace& at);
[[noreturn]] void unsupported_component(const JsonPlace& at, const std::string& type, const std::string& supported);

// The parts of a "Sequence" component: obj[key] must be a list; each element is read by
// parse(element, place); null parts (parse returns nullptr) are dropped.
template <class T, class Parse>
std::vector<std::unique_ptr<T>> sequence_parts(const nlohmann::json& obj, const std::string& key, const JsonPlace& at,
                                               Parse parse) {
  const nlohmann::json& list = object_field(obj, key, at);
  if (!list.is_array()) bad_json(at.child(key), "expected a list");
  std::vector<std::unique_ptr<T>> parts;
  for (size_t i = 0; i < list.size(); ++i) {
    if (auto p = parse(list[i], at.child(key).index(i))) parts.push_back(std::move(p));
  }
  return parts;
}

}  // namespace moerl::model::hf
