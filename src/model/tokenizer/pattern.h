// The "pattern" of a tokenizer.json Split / Replace: {"String": "..."} (a literal) or
// {"Regex": "..."} (see regex.h). Both find non-overlapping matches left to right, as
// tokenizers does (it escapes a literal into a regex).
//
//   Pattern p = parse_pattern(j["pattern"], at);        // {"String": " "}
//   std::string s = p.replace_all("a b c", "▁");         // "a▁b▁c"
//
// Immutable after construction: thread-safe; copies share the compiled regex.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/tokenizer/json_util.h"
#include "model/tokenizer/regex.h"

namespace moerl::model::hf {

class Pattern {
 public:
  static Pattern literal(std::string text);
  static Pattern regex(const std::string& pattern, const std::string& where);

  // Matches in `text` (valid UTF-8), left to right; an empty literal matches nothing.
  void find_all(std::string_view text, std::vector<Span>& out) const;
  std::string replace_all(std::string_view text, std::string_view content) const;

 private:
  std::string literal_;
  std::shared_ptr<const Regex> regex_;  // null for a literal
};

Pattern parse_pattern(const nlohmann::json& j, const JsonPlace& at);

}  // namespace moerl::model::hf
