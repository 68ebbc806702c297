// Math answer normalisation: notation rewrites applied in a fixed order (see the header).
#include "tasks/math_normalize.h"

#include <cctype>
#include <cstring>
#include <optional>
#include <vector>

namespace moerl::tasks {

namespace {

constexpr size_t npos = std::string::npos;

bool is_letter(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

std::string trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return std::string(s);
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t pos = s.find(from); pos != npos; pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
}

// Replaces the control word `cmd`; a command ending in a letter must not be the prefix of
// a longer one (`\left` is not in `\leftarrow`).
void replace_command(std::string& s, std::string_view cmd, std::string_view to) {
  size_t pos = 0;
  while ((pos = s.find(cmd, pos)) != npos) {
    size_t end = pos + cmd.size();
    if (is_letter(cmd.back()) && end < s.size() && is_letter(s[end])) {
      pos = end;
      continue;
    }
    s.replace(pos, cmd.size(), to);
    pos += to.size();
  }
}

// Index of the '}' closing the '{' at `open`, or npos.
size_t match_brace(const std::string& s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      ++i;
      continue;
    }
    if (s[i] == '{') ++depth;
    if (s[i] == '}' && --depth == 0) return i;
  }
  return npos;
}

// `\cmd{X}` -> `X`, innermost or outermost alike (repeated until none is left).
void unwrap(std::string& s, std::string_view cmd) {
  size_t pos = 0;
  while ((pos = s.find(cmd, pos)) != npos) {
    size_t i = pos + cmd.size();
    if (i < s.size() && is_letter(s[i])) {
      pos = i;
      continue;
    }
    while (i < s.size() && s[i] == ' ') ++i;
    size_t close = i < s.size() && s[i] == '{' ? match_brace(s, i) : npos;
    if (close == npos) {
      pos = i;
      continue;
    }
    std::string inner = s.substr(i + 1, close - i - 1);
    // NOTE: "5\text{cm}" -> "5 cm", so that the unit rule sees a word after a value.
    if (pos > 0 && is_digit(s[pos - 1]) && !inner.empty() && is_letter(inner[0])) inner = " " + inner;
    s.replace(pos, close + 1 - pos, inner);
  }
}

struct Arg {
  size_t begin, end;
  bool braced;
};

// One macro argument at `i`: a braced group, a control word (`\pi`) or one character.
std::optional<Arg> read_arg(const std::string& s, size_t i) {
  while (i < s.size() && s[i] == ' ') ++i;
  if (i >= s.size() || s[i] == '}') return std::nullopt;
  if (s[i] == '{') {
    size_t close = match_brace(s, i);
    if (close == npos) return std::nullopt;
    return Arg{i, close + 1, true};
  }
  if (s[i] == '\\') {
    size_t j = i + 1;
    while (j < s.size() && is_letter(s[j])) ++j;
    if (j == i + 1 && j < s.size()) ++j;
    return Arg{i, j, false};
  }
  return Arg{i, i + 1, false};
}

// `\frac12` -> `\frac{1}{2}`, `\sqrt2` -> `\sqrt{2}` (an optional `[n]` of \sqrt is kept).
void brace_args(std::string& s, std::string_view cmd, int num_args) {
  size_t pos = 0;
  while ((pos = s.find(cmd, pos)) != npos) {
    size_t i = pos + cmd.size();
    if (i < s.size() && is_letter(s[i])) {
      pos = i;
      continue;
    }
    std::string out(cmd);
    if (cmd == "\\sqrt" && i < s.size() && s[i] == '[') {
      size_t close = s.find(']', i);
      if (close == npos) break;
      out += s.substr(i, close + 1 - i);
      i = close + 1;
    }
    bool ok = true;
    for (int k = 0; k < num_args && ok; ++k) {
      std::optional<Arg> a = read_arg(s, i);
      if (!a) {
        ok = false;
        break;
      }
      std::string text = s.substr(a->begin, a->end - a->begin);
      out += a->braced ? text : "{" + text + "}";
      i = a->end;
    }
    if (ok) s.replace(pos, i - pos, out);
    pos += cmd.size();  // the arguments may hold more shorthand
  }
}

// `x = 3` -> `3` when the left side is one variable (`x`, `x_1`, `x_{12}`, `\theta`).
void strip_assignment(std::string& s) {
  size_t eq = s.find('=');
  if (eq == npos || s.find('=', eq + 1) != npos) return;
  std::string lhs = trim(std::string_view(s).substr(0, eq));
  size_t j = 0;
  if (!lhs.empty() && is_letter(lhs[0])) {
    j = 1;
    if (j < lhs.size() && lhs[j] == '_') {
      ++j;
      if (j < lhs.size() && lhs[j] == '{') {
        size_t close = lhs.find('}', j);
        j = close == npos ? 0 : close + 1;
      } else if (j < lhs.size() && std::isalnum(static_cast<unsigned char>(lhs[j]))) {
        ++j;
      } else {
        j = 0;
      }
    }
  } else if (lhs.size() > 1 && lhs[0] == '\\') {
    j = 1;
    while (j < lhs.size() && is_letter(lhs[j])) ++j;
  }
  if (j == 0 || j != lhs.size()) return;
  s = trim(std::string_view(s).substr(eq + 1));
}

// A unit-like word: 2+ letters, an optional '.', an optional ^2 / ^3 / ^{2} / ^{3}.
bool unit_word(std::string_view w) {
  size_t i = 0;
  while (i < w.size() && is_letter(w[i])) ++i;
  if (i < 2) return false;
  if (i < w.size() && w[i] == '.') ++i;
  std::string_view rest = w.substr(i);
  return rest.empty() || rest == "^2" || rest == "^3" || rest == "^{2}" || rest == "^{3}";
}

// Drops trailing unit words after a value that ends in a digit or a closing bracket.
void strip_units(std::string& s) {
  size_t end = s.size();
  while (true) {
    size_t space = s.find_last_of(" \t", end == 0 ? 0 : end - 1);
    if (space == npos || space == 0) break;
    std::string_view word = std::string_view(s).substr(space + 1, end - space - 1);
    if (!word.empty() && !unit_word(word)) break;
    end = space;
    while (end > 0 && (s[end - 1] == ' ' || s[end - 1] == '\t')) --end;
    if (end == 0) return;
    char last = s[end - 1];
    if (is_digit(last) || last == '}' || last == ')' || last == ']') {
      s.resize(end);
      return;
    }
  }
}

// "1,234,567.5": one number with correct thousands grouping and nothing else.
bool grouped_number(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  size_t lead = 0;
  while (i < s.size() && is_digit(s[i])) ++i, ++lead;
  if (lead == 0 || lead > 3) return false;
  int groups = 0;
  while (i < s.size() && s[i] == ',') {
    for (int k = 1; k <= 3; ++k) {
      if (i + k >= s.size() || !is_digit(s[i + k])) return false;
    }
    i += 4;
    ++groups;
  }
  if (groups == 0) return false;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && is_digit(s[i])) ++i;
  }
  return i == s.size();
}

void strip_trailing_periods(std::string& s) {
  while (!s.empty() && (s.back() == '.' || is_space(s.back()))) s.pop_back();
}

}  // namespace

std::string normalize_math_answer(std::string_view answer) {
  std::string s(answer);
  replace_all(s, "\xE2\x88\x92", "-");        // U+2212 minus sign
  replace_all(s, "\xE2\x88\x9E", "\\infty");  // U+221E
  replace_all(s, "\xCF\x80", "\\pi");         // U+03C0
  replace_all(s, "\xC2\xB0", "");             // U+00B0 degree sign
  replace_all(s, "\\$", "");
  replace_command(s, "\\dollars", "");
  replace_command(s, "\\dollar", "");
  replace_all(s, "$", "");
  for (const char* d : {"\\(", "\\)", "\\[", "\\]"}) replace_all(s, d, "");
  for (const char* cmd : {"\\boxed", "\\fbox", "\\text", "\\textbf", "\\textit", "\\textrm", "\\mathrm",
                          "\\mathbf", "\\mathit", "\\mbox", "\\operatorname"}) {
    unwrap(s, cmd);
  }
  for (const char* cmd : {"\\left", "\\right", "\\displaystyle", "\\qquad", "\\quad"}) replace_command(s, cmd, "");
  for (const char* cmd : {"\\!", "\\,", "\\;", "\\:", "\\ "}) replace_all(s, cmd, "");
  replace_all(s, "{,}", ",");
  replace_command(s, "\\dfrac", "\\frac");
  replace_command(s, "\\tfrac", "\\frac");
  replace_command(s, "\\leq", "\\le");
  replace_command(s, "\\geq", "\\ge");
  replace_all(s, "^{\\circ}", "");
  replace_all(s, "^\\circ", "");
  replace_command(s, "\\circ", "");
  replace_command(s, "\\degree", "");
  replace_all(s, "\\%", "");
  replace_all(s, "%", "");
  brace_args(s, "\\frac", 2);
  brace_args(s, "\\sqrt", 1);

  s = trim(s);
  while (s.size() >= 2 && s.front() == '*' && s.back() == '*') s = trim(std::string_view(s).substr(1, s.size() - 2));
  strip_trailing_periods(s);
  strip_assignment(s);
  strip_units(s);
  std::string out;
  for (char c : s) {
    if (!is_space(c)) out += c;
  }
  strip_trailing_periods(out);
  if (grouped_number(out)) replace_all(out, ",", "");
  if (out.size() == 3 && out[0] == '(' && is_letter(out[1]) && out[2] == ')') out = out.substr(1, 1);
  if (out == "inf" || out == "infinity" || out == "+inf" || out == "+infinity" || out == "+\\infty") out = "\\infty";
  if (out == "-inf" || out == "-infinity") out = "-\\infty";
  return out;
}

}  // namespace moerl::tasks
