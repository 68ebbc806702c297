// Writes JSON values (nlohmann::ordered_json, key order kept) as block-style YAML, the form
// kubectl and eksctl read. Strings that could be misread (numbers, booleans, ':' ...) are
// double-quoted with JSON escapes, which YAML 1.2 reads as the same string; multi-line
// strings become literal blocks.
//
//   std::string y = to_yaml(obj);            // one document
//   std::string all = to_yaml_stream({a, b}); // "---"-separated documents
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace moerl::deploy {

using Json = nlohmann::ordered_json;

std::string to_yaml(const Json& doc);
std::string to_yaml_stream(const std::vector<Json>& docs);

}  // namespace moerl::deploy
