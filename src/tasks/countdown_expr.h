// Safe evaluation of Countdown answers: integer literals, + - * /, parentheses, spaces.
// Exact rational arithmetic; no unary minus. Bounded: at most 64 characters, nesting depth
// 16, literals of at most 6 digits, |numerator|, denominator <= 1e12 (else rejected).
//
//   std::string why;
//   auto v = evaluate_expression("(3+5)*7", &why);   // v->value == Fraction{56, 1}
//   // v->literals == {3, 5, 7}
// Pure function; malformed input returns nullopt with the reason in *why.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moerl::tasks {

struct Fraction {
  int64_t num = 0;
  int64_t den = 1;  // > 0; num/den in lowest terms
  bool operator==(const Fraction& o) const { return num == o.num && den == o.den; }
};

struct ExprValue {
  Fraction value;
  std::vector<int64_t> literals;  // in order of appearance
};

std::optional<ExprValue> evaluate_expression(std::string_view text, std::string* why = nullptr);

}  // namespace moerl::tasks
