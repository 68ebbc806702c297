// Recursive-descent parser and exact rational evaluator for Countdown expressions.
#include "tasks/countdown_expr.h"

#include <cstdlib>
#include <numeric>

namespace moerl::tasks {

namespace {

constexpr size_t kMaxChars = 64;
constexpr int kMaxDepth = 16;
constexpr int kMaxLiteralDigits = 6;
constexpr __int128 kMaxMagnitude = 1000000000000LL;  // 1e12

struct Fail {
  std::string why;
};

// grammar: expr := term (('+'|'-') term)* ; term := factor (('*'|'/') factor)* ;
//          factor := digits | '(' expr ')'
class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  ExprValue parse() {
    ExprValue out;
    out.value = expr(0, out.literals);
    skip_spaces();
    if (pos_ != s_.size()) fail(std::string("unexpected '") + s_[pos_] + "'");
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw Fail{why + " at position " + std::to_string(pos_)};
  }
  void skip_spaces() {
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
  }
  char peek() {
    skip_spaces();
    return pos_ < s_.size() ? s_[pos_] : '\0';
  }

  static Fraction make(__int128 num, __int128 den) {
    if (den < 0) num = -num, den = -den;
    __int128 a = num < 0 ? -num : num, b = den;
    while (b != 0) {
      __int128 t = a % b;
      a = b;
      b = t;
    }
    if (a > 1) num /= a, den /= a;
    if ((num < 0 ? -num : num) > kMaxMagnitude || den > kMaxMagnitude) throw Fail{"value too large"};
    return Fraction{static_cast<int64_t>(num), static_cast<int64_t>(den)};
  }

  Fraction apply(char op, Fraction a, Fraction b) {
    __int128 an = a.num, ad = a.den, bn = b.num, bd = b.den;
    switch (op) {
      case '+': return make(an * bd + bn * ad, ad * bd);
      case '-': return make(an * bd - bn * ad, ad * bd);
      case '*': return make(an * bn, ad * bd);
      default:
        if (bn == 0) fail("division by zero");
        return make(an * bd, ad * bn);
    }
  }

  Fraction expr(int depth, std::vector<int64_t>& lits) {
    Fraction v = term(depth, lits);
    for (char c = peek(); c == '+' || c == '-'; c = peek()) {
      ++pos_;
      v = apply(c, v, term(depth, lits));
    }
    return v;
  }

  Fraction term(int depth, std::vector<int64_t>& lits) {
    Fraction v = factor(depth, lits);
    for (char c = peek(); c == '*' || c == '/'; c = peek()) {
      ++pos_;
      v = apply(c, v, factor(depth, lits));
    }
    return v;
  }

  Fraction factor(int depth, std::vector<int64_t>& lits) {
    char c = peek();
    if (c == '(') {
      if (depth >= kMaxDepth) fail("parentheses nested too deep");
      ++pos_;
      Fraction v = expr(depth + 1, lits);
      if (peek() != ')') fail("missing ')'");
      ++pos_;
      return v;
    }
    if (c < '0' || c > '9') fail(c == '\0' ? "expression ends early" : std::string("unexpected '") + c + "'");
    size_t start = pos_;
    int64_t n = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      if (pos_ - start >= static_cast<size_t>(kMaxLiteralDigits)) fail("number too long");
      n = n * 10 + (s_[pos_] - '0');
      ++pos_;
    }
    lits.push_back(n);
    return Fraction{n, 1};
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

std::optional<ExprValue> evaluate_expression(std::string_view text, std::string* why) {
  if (text.size() > kMaxChars) {
    if (why) *why = "longer than " + std::to_string(kMaxChars) + " characters";
    return std::nullopt;
  }
  try {
    return Parser(text).parse();
  } catch (const Fail& f) {
    if (why) *why = f.why;
    return std::nullopt;
  }
}

}  // namespace moerl::tasks
