// Answer checks shared by dataset tasks: exact match and numeric match with tolerance, which
// judge answer_text(completion) (first line, trimmed), and math, which judges the whole
// completion (final-answer extraction, normalisation, comparison: math_extract.h,
// math_normalize.h, math_equal.h). Rewards in [0, 1].
//
//   double r = verify(VerifierKind::kNumeric, completion, "0.5", {.tolerance = 1e-6});
//   double m = verify(VerifierKind::kMath, "so \\boxed{\\frac12}", "0.5", {});   // 1
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace moerl::tasks {

enum class VerifierKind { kExact, kNumeric, kMath };
const char* name_of(VerifierKind kind);

struct VerifierOptions {
  double tolerance = 1e-6;     // numeric, math: |x - ref| <= tolerance * max(1, |ref|)
  double format_reward = 0.0;  // numeric, math: reward for a well-formed answer that misses
};

// Strict decimal number: [+-]digits[.digits][(e|E)[+-]digits] (or [+-].digits); no
// inf/nan/hex, no surrounding text. nullopt otherwise.
std::optional<double> parse_number(std::string_view s);

//   kExact:   1 if answer_text(completion) == reference, else 0
//   kNumeric: 1 if both parse and match within tolerance; format_reward if the answer
//             parses but misses; 0 otherwise
//   kMath:    1 if the completion's final answer equals the reference's (both extracted
//             by math_reference_answer rules, the completion's strictly by
//             extract_math_answer, then normalised); format_reward if an answer was
//             extracted but differs; 0 if none was (or the reference yields none)
double verify(VerifierKind kind, std::string_view completion, std::string_view reference,
              const VerifierOptions& options);

}  // namespace moerl::tasks
