#include "model/jinja/lexer.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace moerl::jinja {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      size_t start = pos;
      while (true) {
        start = src_.find('{', start);
        if (start == std::string::npos || start + 1 >= src_.size()) {
          start = std::string::npos;
          break;
        }
        const char k = src_[start + 1];
        if (k == '{' || k == '%' || k == '#') break;
        ++start;
      }
      if (start == std::string::npos) {
        emit_text(src_.substr(pos), pos);
        break;
      }
      std::string text = src_.substr(pos, start - pos);
      const char kind = src_[start + 1];
      const char mod = start + 2 < src_.size() ? src_[start + 2] : '\0';
      if (mod == '-') {
        text.erase(std::find_if_not(text.rbegin(), text.rend(), is_space).base(), text.end());
      } else if (mod != '+' && kind != '{') {  // lstrip_blocks
        const size_t l = text.rfind('\n') + 1;  // npos + 1 == 0
        if ((l > 0 || line_starting) && l < text.size() &&
            std::all_of(text.begin() + static_cast<long>(l), text.end(), is_space)) {
          text.resize(l);
        }
      }
      emit_text(text, pos);
      pos = start + 2 + (mod == '-' || mod == '+' ? 1 : 0);
      if (kind == '#') {
        size_t end = src_.find("#}", pos);
        if (end == std::string::npos) throw_at(at(start), "unterminated comment: '{#' without '#}'");
        const char before = end > pos ? src_[end - 1] : '\0';
        pos = after_tag_end(end + 2, before);
      } else {
        toks_.push_back({kind == '{' ? Tok::kVarBegin : Tok::kBlockBegin, "", at(start)});
        pos = lex_tag(pos, kind == '{', start);
      }
      line_starting = pos > 0 && src_[pos - 1] == '\n';
    }
    toks_.push_back({Tok::kEof, "", at(src_.size())});
    return std::move(toks_);
  }

 private:
  Pos at(size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const size_t line_start = *(it - 1);
    return {static_cast<int>(it - line_starts_.begin()), static_cast<int>(offset - line_start + 1)};
  }

  void emit_text(const std::string& text, size_t offset) {
    if (!text.empty()) toks_.push_back({Tok::kText, text, at(offset)});
  }

  // Position after a tag's closing delimiter ending at `after`: `-` strips all following
  // whitespace, `+` keeps it, otherwise trim_blocks drops one newline (not after }}).
  size_t after_tag_end(size_t after, char modifier, bool is_var = false) {
    if (modifier == '-') {
      while (after < src_.size() && is_space(src_[after])) ++after;
    } else if (modifier != '+' && !is_var && after < src_.size() && src_[after] == '\n') {
      ++after;
    }
    return after;
  }

  size_t lex_tag(size_t pos, bool is_var, size_t tag_start) {
    const char* close = is_var ? "}}" : "%}";
    int depth = 0;  // open ( [ {: a } inside them does not close the tag
    while (true) {
      while (pos < src_.size() && is_space(src_[pos])) ++pos;
      if (pos >= src_.size()) {
        throw_at(at(tag_start), std::string("unterminated tag: '") + (is_var ? "{{" : "{%") + "' without '" + close + "'");
      }
      const char c = src_[pos];
      if (depth == 0) {
        const bool modified = (c == '-' || c == '+') && src_.compare(pos + 1, 2, close) == 0;
        if (modified || src_.compare(pos, 2, close) == 0) {
          toks_.push_back({is_var ? Tok::kVarEnd : Tok::kBlockEnd, "", at(pos)});
          return after_tag_end(pos + (modified ? 3 : 2), modified ? c : '\0', is_var);
        }
      }
      if (is_name_start(c)) {
        size_t e = pos;
        while (e < src_.size() && (is_name_start(src_[e]) || is_digit(src_[e]))) ++e;
        toks_.push_back({Tok::kName, src_.substr(pos, e - pos), at(pos)});
        pos = e;
      } else if (is_digit(c)) {
        pos = lex_number(pos);
      } else if (c == '\'' || c == '"') {
        pos = lex_string(pos);
      } else {
        static const char* kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
                                     "=",  "(",  ")",  "[",  "]",  "{",  "}", ",", ".", ":", "|"};
        const char* op = nullptr;
        for (const char* o : kOps) {
          if (src_.compare(pos, std::strlen(o), o) == 0) {
            op = o;
            break;
          }
        }
        if (op == nullptr) throw_at(at(pos), std::string("unexpected character '") + c + "' in a tag");
        if (c == '(' || c == '[' || c == '{') ++depth;
        if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
        toks_.push_back({Tok::kOp, op, at(pos)});
        pos += std::strlen(op);
      }
    }
  }

  size_t lex_number(size_t pos) {
    size_t e = pos;
    while (e < src_.size() && (is_digit(src_[e]) || src_[e] == '_')) ++e;
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && is_digit(src_[e + 1])) {
      is_float = true;
      ++e;
      while (e < src_.size() && (is_digit(src_[e]) || src_[e] == '_')) ++e;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t x = e + 1;
      if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
      if (x < src_.size() && is_digit(src_[x])) {
        is_float = true;
        e = x;
        while (e < src_.size() && is_digit(src_[e])) ++e;
      }
    }
    std::string text = src_.substr(pos, e - pos);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    toks_.push_back({is_float ? Tok::kFloat : Tok::kInt, text, at(pos)});
    return e;
  }

  // Python string literal escapes; an unknown escape keeps its backslash, as Python does.
  size_t lex_string(size_t pos) {
    const char q = src_[pos];
    std::string out;
    size_t i = pos + 1;
    while (true) {
      if (i >= src_.size()) throw_at(at(pos), "unterminated string literal");
      const char c = src_[i];
      if (c == q) break;
      if (c != '\\' || i + 1 >= src_.size()) {
        out += c;
        ++i;
        continue;
      }
      const char e = src_[i + 1];
      i += 2;
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '0': out += '\0'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\n': break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (i + n > src_.size()) throw_at(at(i - 2), "truncated \\" + std::string(1, e) + " escape");
          const std::string hex = src_.substr(i, n);
          if (hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
            throw_at(at(i - 2), "bad \\" + std::string(1, e) + " escape '" + hex + "'");
          }
          append_utf8(out, static_cast<uint32_t>(std::stoul(hex, nullptr, 16)));
          i += n;
          break;
        }
        default: out += '\\'; out += e;
      }
    }
    toks_.push_back({Tok::kString, out, at(pos)});
    return i + 1;
  }

  std::string src_;
  std::vector<size_t> line_starts_ = {0};
  std::vector<Token> toks_;
};

std::string normalize(const std::string& source) {
  std::string s;
  s.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      s += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      s += source[i];
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();  // keep_trailing_newline=False
  return s;
}

}  // namespace

std::vector<Token> lex(const std::string& source) { return Lexer(normalize(source)).run(); }

}  // namespace moerl::jinja
