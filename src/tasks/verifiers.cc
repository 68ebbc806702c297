// Exact-match, numeric and math verifiers.
#include "tasks/verifiers.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "tasks/math_equal.h"
#include "tasks/math_extract.h"
#include "tasks/math_normalize.h"
#include "tasks/task.h"

namespace moerl::tasks {

const char* name_of(VerifierKind kind) {
  switch (kind) {
    case VerifierKind::kExact: return "exact";
    case VerifierKind::kNumeric: return "numeric";
    case VerifierKind::kMath: return "math";
  }
  return "?";
}

std::optional<double> parse_number(std::string_view s) {
  size_t i = 0;
  auto digits = [&]() {
    size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i - start;
  };
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  size_t whole = digits(), frac = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    frac = digits();
  }
  if (whole + frac == 0) return std::nullopt;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (digits() == 0) return std::nullopt;
  }
  if (i != s.size() || s.size() > 64) return std::nullopt;
  double v = std::strtod(std::string(s).c_str(), nullptr);
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

namespace {

double verify_math(std::string_view completion, std::string_view reference, const VerifierOptions& options) {
  std::optional<std::string> got = extract_math_answer(completion);
  if (!got) return 0.0;
  std::string answer = normalize_math_answer(*got);
  if (answer.empty()) return 0.0;
  std::optional<std::string> want = math_reference_answer(reference);
  if (want && math_equal(answer, normalize_math_answer(*want), options.tolerance)) return 1.0;
  return options.format_reward;
}

}  // namespace

double verify(VerifierKind kind, std::string_view completion, std::string_view reference,
              const VerifierOptions& options) {
  if (kind == VerifierKind::kMath) return verify_math(completion, reference, options);
  std::string_view a = answer_text(completion);
  if (kind == VerifierKind::kExact) return a == reference ? 1.0 : 0.0;
  std::optional<double> got = parse_number(a), want = parse_number(reference);
  if (!got) return 0.0;
  if (want && std::abs(*got - *want) <= options.tolerance * std::max(1.0, std::abs(*want))) return 1.0;
  return options.format_reward;
}

}  // namespace moerl::tasks
