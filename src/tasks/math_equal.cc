// Math answer comparison: numeric value, bracketed sequences, unordered lists, strings.
#include "tasks/math_equal.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tasks/verifiers.h"

namespace moerl::tasks {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// [+-]digits, canonicalised (no '+', no leading zeros, "-0" -> "0"); nullopt otherwise.
std::optional<std::string> integer_literal(std::string_view s) {
  bool negative = !s.empty() && s[0] == '-';
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  if (s.empty() || !std::all_of(s.begin(), s.end(), is_digit)) return std::nullopt;
  while (s.size() > 1 && s[0] == '0') s.remove_prefix(1);
  if (s == "0") negative = false;
  return (negative ? "-" : "") + std::string(s);
}

// `{X}` at the front of s: X, and s advanced past it.
std::optional<std::string_view> take_group(std::string_view& s) {
  if (s.empty() || s[0] != '{') return std::nullopt;
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '{') ++depth;
    if (s[i] == '}' && --depth == 0) {
      std::string_view inner = s.substr(1, i - 1);
      s.remove_prefix(i + 1);
      return inner;
    }
  }
  return std::nullopt;
}

std::optional<double> ratio(std::optional<double> a, std::optional<double> b) {
  if (!a || !b || *b == 0) return std::nullopt;
  double v = *a / *b;
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

// Splits at commas outside (), [], {}; one part when there is none.
std::vector<std::string_view> split_top(std::string_view s) {
  std::vector<std::string_view> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.push_back(s.substr(start));
  return parts;
}

// "(a,b)", "[a,b)", ...: brackets that enclose the whole string (not "(1)+(2)").
bool bracketed(std::string_view s) {
  if (s.size() < 2 || (s.front() != '(' && s.front() != '[') || (s.back() != ')' && s.back() != ']')) return false;
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
    if (depth == 0 && i + 1 < s.size()) return false;
  }
  return true;
}

bool scalar_equal(std::string_view a, std::string_view ref, double tolerance) {
  if (a == ref) return true;
  std::optional<std::string> ia = integer_literal(a), ir = integer_literal(ref);
  if (ia && ir) return *ia == *ir;
  std::optional<double> x = math_number(a), y = math_number(ref);
  if (!x || !y) return false;
  return std::abs(*x - *y) <= tolerance * std::max(1.0, std::abs(*y));
}

}  // namespace

std::optional<double> math_number(std::string_view s) {
  if (std::optional<double> v = parse_number(s)) return v;
  double sign = 1;
  std::string_view t = s;
  if (!t.empty() && (t[0] == '-' || t[0] == '+')) {
    sign = t[0] == '-' ? -1 : 1;
    t.remove_prefix(1);
  }
  if (t.substr(0, 5) == "\\frac") {
    t.remove_prefix(5);
    std::optional<std::string_view> num = take_group(t), den = take_group(t);
    if (!num || !den || !t.empty()) return std::nullopt;
    std::optional<double> v = ratio(parse_number(*num), parse_number(*den));
    if (!v) return std::nullopt;
    return sign * *v;
  }
  if (size_t slash = s.find('/'); slash != std::string_view::npos && s.find('/', slash + 1) == std::string_view::npos) {
    return ratio(parse_number(s.substr(0, slash)), parse_number(s.substr(slash + 1)));
  }
  for (std::string_view times : {std::string_view("\\times10^"), std::string_view("\\cdot10^")}) {
    size_t at = s.find(times);
    if (at == std::string_view::npos) continue;
    std::string_view exp = s.substr(at + times.size());
    if (!exp.empty() && exp[0] == '{') {
      std::optional<std::string_view> inner = take_group(exp);
      if (!inner || !exp.empty()) return std::nullopt;
      exp = *inner;
    }
    std::optional<double> mantissa = parse_number(s.substr(0, at)), power = parse_number(exp);
    if (!mantissa || !power) return std::nullopt;
    double v = *mantissa * std::pow(10.0, *power);
    if (!std::isfinite(v)) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

bool math_equal(std::string_view a, std::string_view ref, double tolerance) {
  if (a.empty() || ref.empty()) return false;
  if (a == ref) return true;
  if (bracketed(a) && bracketed(ref)) {
    if (a.front() != ref.front() || a.back() != ref.back()) return false;
    std::vector<std::string_view> pa = split_top(a.substr(1, a.size() - 2));
    std::vector<std::string_view> pr = split_top(ref.substr(1, ref.size() - 2));
    if (pa.size() != pr.size()) return false;
    for (size_t i = 0; i < pa.size(); ++i) {
      if (!math_equal(pa[i], pr[i], tolerance)) return false;
    }
    return true;
  }
  std::vector<std::string_view> pa = split_top(a), pr = split_top(ref);
  if (pa.size() > 1 || pr.size() > 1) {
    // An unbracketed list ("1, -2": the solutions of an equation) matches in any order.
    if (pa.size() != pr.size()) return false;
    std::vector<bool> used(pr.size(), false);
    for (std::string_view x : pa) {
      bool found = false;
      for (size_t j = 0; j < pr.size() && !found; ++j) {
        if (!used[j] && math_equal(x, pr[j], tolerance)) used[j] = found = true;
      }
      if (!found) return false;
    }
    return true;
  }
  return scalar_equal(a, ref, tolerance);
}

}  // namespace moerl::tasks
