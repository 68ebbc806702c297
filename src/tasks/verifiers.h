// Answer checks shared by dataset tasks: exact match and numeric match with tolerance.
// Both judge answer_text(completion) (first line, trimmed); rewards in [0, 1].
//
//   double r = verify(VerifierKind::kNumeric, completion, "0.5", {.tolerance = 1e-6});
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace moerl::tasks {

enum class VerifierKind { kExact, kNumeric };
const char* name_of(VerifierKind kind);

struct VerifierOptions {
  double tolerance = 1e-6;     // numeric: |x - ref| <= tolerance * max(1, |ref|)
  double format_reward = 0.0;  // numeric: reward for a number that misses
};

// Strict decimal number: [+-]digits[.digits][(e|E)[+-]digits] (or [+-].digits); no
// inf/nan/hex, no surrounding text. nullopt otherwise.
std::optional<double> parse_number(std::string_view s);

//   kExact:   1 if answer_text(completion) == reference, else 0
//   kNumeric: 1 if both parse and match within tolerance; format_reward if the answer
//             parses but misses; 0 otherwise
double verify(VerifierKind kind, std::string_view completion, std::string_view reference,
              const VerifierOptions& options);

}  // namespace moerl::tasks
