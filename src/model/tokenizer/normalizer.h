// Normalizers of tokenizer.json ("normalizer"): NFC, NFD, NFKC, NFKD (utf8proc), Prepend, Replace
// (a literal string or a regex), Sequence. Other types are an Error naming the type.
//
//   std::unique_ptr<Normalizer> n = parse_normalizer(j["normalizer"], {path, "normalizer"});
//   std::string s = "hello world";
//   n->normalize(s);                          // Llama-2: "▁hello▁world"
//
// Immutable after construction: thread-safe.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "model/tokenizer/json_util.h"

namespace moerl::model::hf {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // Rewrites `text` (valid UTF-8) in place.
  virtual void normalize(std::string& text) const = 0;
};

// Null JSON gives nullptr (no normalizer).
std::unique_ptr<Normalizer> parse_normalizer(const nlohmann::json& j, const JsonPlace& at);

}  // namespace moerl::model::hf
