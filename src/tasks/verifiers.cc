// Exact-match and numeric verifiers.
#include "tasks/verifiers.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "tasks/task.h"

namespace moerl::tasks {

const char* name_of(VerifierKind kind) { return kind == VerifierKind::kNumeric ? "numeric" : "exact"; }

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

double verify(VerifierKind kind, std::string_view completion, std::string_view reference,
              const VerifierOptions& options) {
  std::string_view a = answer_text(completion);
  if (kind == VerifierKind::kExact) return a == reference ? 1.0 : 0.0;
  std::optional<double> got = parse_number(a), want = parse_number(reference);
  if (!got) return 0.0;
  if (want && std::abs(*got - *want) <= options.tolerance * std::max(1.0, std::abs(*want))) return 1.0;
  return options.format_reward;
}

}  // namespace moerl::tasks
