#include "model/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/error.h"
#include "base/utf8.h"

namespace moerl::model::hf {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

// Per-thread match state: one ovector pair is enough (only the whole match is used) and a
// JIT stack large enough for long runs of one character class.
struct MatchState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  MatchState() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~MatchState() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

MatchState& match_state() {
  thread_local MatchState s;
  return s;
}

}  // namespace

std::string oniguruma_whitespace(const std::string& pattern) {
  std::string out;
  out.reserve(pattern.size() + 16);
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c != '\\' || i + 1 == pattern.size()) {
      out.push_back(c);
      continue;
    }
    const char e = pattern[i + 1];
    if (e == 's') {
      out += "\\p{White_Space}";
    } else if (e == 'S') {
      out += "\\P{White_Space}";
    } else if (e == 'Q') {  // quoted to \E (or the end): copied untouched
      const size_t end = pattern.find("\\E", i + 2);
      const size_t stop = end == std::string::npos ? pattern.size() : end + 2;
      out.append(pattern, i, stop - i);
      i = stop - 1;
      continue;
    } else {
      out.push_back(c);
      out.push_back(e);
    }
    ++i;
  }
  return out;
}

Regex::Regex(const std::string& pattern, const std::string& where) : pattern_(pattern), where_(where) {
  const std::string rewritten = oniguruma_whitespace(pattern);
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.data()), rewritten.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
  if (code == nullptr) {
    throw Error(where + ": regex " + pattern + " does not compile (" + pcre2_message(err) + " at offset " +
                    std::to_string(offset) + " of the PCRE2 form " + rewritten + ")",
                "tokenizer.json regexes use Oniguruma/Perl syntax; report the pattern if it is valid there");
  }
  code_ = code;
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

bool Regex::search(std::string_view text, size_t from, Span& m, bool anchored) const {
  MatchState& st = match_state();
  auto* code = static_cast<pcre2_code*>(code_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  int rc;
  if (jit_ && !anchored) {
    rc = pcre2_jit_match(code, subject, text.size(), from, 0, st.data, st.context);
  } else {
    rc = pcre2_match(code, subject, text.size(), from, PCRE2_NO_UTF_CHECK | (anchored ? PCRE2_ANCHORED : 0), st.data,
                     st.context);
  }
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    throw Error(where_ + ": regex " + pattern_ + " failed on a text of " + std::to_string(text.size()) + " bytes (" +
                    pcre2_message(rc) + ")",
                "split the input into smaller pieces", ErrorCode::kInvalidInput);
  }
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
  m.begin = ov[0];
  m.end = ov[1];
  return true;
}

void Regex::find_all(std::string_view text, std::vector<Span>& out) const {
  out.clear();
  size_t from = 0;
  bool have_last = false;
  size_t last_end = 0;
  Span m;
  while (from <= text.size() && search(text, from, m, false)) {
    if (m.begin == m.end && have_last && m.end == last_end) {
      // NOTE: as Oniguruma's iterator in tokenizers: skip one character and search again.
      if (from >= text.size()) break;
      from += utf8_char_length(static_cast<unsigned char>(text[from]));
      continue;
    }
    out.push_back(m);
    from = m.end;
    last_end = m.end;
    have_last = true;
  }
}

bool Regex::matches_at_start(std::string_view text) const {
  Span m;
  return search(text, 0, m, true);
}

}  // namespace moerl::model::hf
