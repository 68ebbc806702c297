// Final-answer extraction: last \boxed / \fbox, GSM8K "####", "the answer is" phrases.
#include "tasks/math_extract.h"

#include <cctype>

namespace moerl::tasks {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
bool is_letter(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }

std::string trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return std::string(s);
}

// Position of the last `\boxed` or `\fbox` control word (not a prefix of a longer word).
std::string_view::size_type last_box(std::string_view text) {
  std::string_view::size_type best = std::string_view::npos;
  for (std::string_view cmd : {std::string_view("\\boxed"), std::string_view("\\fbox")}) {
    for (size_t pos = text.find(cmd); pos != std::string_view::npos; pos = text.find(cmd, pos + 1)) {
      size_t end = pos + cmd.size();
      if (end < text.size() && is_letter(text[end])) continue;
      if (best == std::string_view::npos || pos > best) best = pos;
    }
  }
  return best;
}

// Content of the box starting at `pos`; nullopt when its braces never close.
std::optional<std::string> box_content(std::string_view text, size_t pos) {
  size_t i = pos + 1;
  while (i < text.size() && is_letter(text[i])) ++i;  // skip the command name
  size_t after_name = i;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  if (i < text.size() && text[i] == '{') {
    int depth = 0;
    for (size_t j = i; j < text.size(); ++j) {
      if (text[j] == '\\' && j + 1 < text.size()) {  // \{ and \} do not nest
        ++j;
        continue;
      }
      if (text[j] == '{') ++depth;
      if (text[j] == '}' && --depth == 0) return trim(text.substr(i + 1, j - i - 1));
    }
    return std::nullopt;
  }
  // "\boxed 5" (hendrycks MATH): up to the closing '$' or the end of the line.
  size_t end = text.find_first_of("$\n", after_name);
  return trim(text.substr(after_name, end == std::string_view::npos ? end : end - after_name));
}

std::optional<std::string> hash_answer(std::string_view text) {
  size_t pos = text.rfind("####");
  if (pos == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(pos + 4);
  return trim(rest.substr(0, rest.find('\n')));
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::optional<std::string> phrase_answer(std::string_view text) {
  std::string low = lower(text);
  size_t best_end = std::string::npos;
  for (const char* phrase : {"the answer is", "the final answer is"}) {
    size_t pos = low.rfind(phrase);
    if (pos == std::string::npos) continue;
    size_t end = pos + std::char_traits<char>::length(phrase);
    if (best_end == std::string::npos || end > best_end) best_end = end;
  }
  if (best_end == std::string::npos) return std::nullopt;
  size_t i = best_end;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  if (i < text.size() && text[i] == ':') ++i;
  size_t j = i;
  for (; j < text.size(); ++j) {
    char c = text[j];
    if (c == '\n') break;
    bool sentence_end = (c == '.' || c == '!' || c == '?') && (j + 1 == text.size() || is_space(text[j + 1]));
    if (sentence_end) break;
  }
  return trim(text.substr(i, j - i));
}

}  // namespace

std::optional<std::string> extract_math_answer(std::string_view text) {
  std::optional<std::string> got;
  if (size_t pos = last_box(text); pos != std::string_view::npos) {
    got = box_content(text, pos);
  } else if (text.find("####") != std::string_view::npos) {
    got = hash_answer(text);
  } else {
    got = phrase_answer(text);
  }
  if (got && got->empty()) return std::nullopt;
  return got;
}

std::optional<std::string> math_reference_answer(std::string_view reference) {
  bool marked = last_box(reference) != std::string_view::npos || reference.find("####") != std::string_view::npos ||
                phrase_answer(reference).has_value();
  if (marked) return extract_math_answer(reference);
  std::string whole = trim(reference);
  if (whole.empty()) return std::nullopt;
  return whole;
}

}  // namespace moerl::tasks
