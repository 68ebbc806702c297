// Regular expressions of tokenizer.json (Split pre-tokenizer, Replace normalizer/decoder)
// on PCRE2 with UTF, Unicode properties (UCP) and the JIT. `tokenizers` compiles these
// patterns with Oniguruma; the two engines agree on the syntax the patterns use (\p{..}
// classes, lookahead, (?i:...)) except for `\s`, which PCRE2 also matches on U+180E: `\s`
// and `\S` are rewritten to \p{White_Space} / \P{White_Space}, Oniguruma's definition.
//
//   Regex re(R"(\p{N}{1,3})", "tokenizer.json: pre_tokenizer.pretokenizers[0]");
//   std::vector<Span> spans;
//   re.find_all("abc 12345", spans);     // {4,7} {7,9}
//
// Immutable after construction: one Regex may be used from many threads (match state is
// per thread). A pattern PCRE2 rejects is a moerl::Error naming `where` and the offset.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace moerl::model::hf {

struct Span {
  size_t begin = 0, end = 0;  // byte offsets, [begin, end)
};

class Regex {
 public:
  Regex(const std::string& pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Every match, left to right, as tokenizers' find_iter: after a match ending at e, the
  // search resumes at e, and an empty match at the end of the previous match is skipped
  // by moving the start one character on. Precondition: `text` is valid UTF-8.
  void find_all(std::string_view text, std::vector<Span>& out) const;
  // True when the pattern matches at offset 0 of `text` (valid UTF-8).
  bool matches_at_start(std::string_view text) const;
  const std::string& pattern() const { return pattern_; }

 private:
  // True and sets `m` when a match starts at or after `from`.
  bool search(std::string_view text, size_t from, Span& m, bool anchored) const;

  std::string pattern_;
  std::string where_;
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

// `pattern` with \s and \S replaced by \p{White_Space} and \P{White_Space} (also inside
// character classes); escapes such as `\\s` and \Q...\E quoting are left alone.
std::string oniguruma_whitespace(const std::string& pattern);

}  // namespace moerl::model::hf
