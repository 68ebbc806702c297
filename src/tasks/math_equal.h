// Equality of two normalised math answers (normalize_math_answer): numbers by value,
// tuples/intervals element-wise, solution lists in any order, anything else as strings.
// No symbolic algebra: `2x+1` vs `1+2x`, `\pi/2` vs `1.5708`, `\sqrt{4}` vs `2` differ.
//
//   math_equal("\\frac{1}{2}", "0.5", 1e-6)   -> true
//   math_equal("(1,2]", "(1,2)", 1e-6)        -> false (interval ends differ)
//   math_equal("1,-2", "-2,1", 1e-6)          -> true  (an unbracketed list is a set)
// Numbers: plain decimals and scientific notation (parse_number), `a/b`, `\frac{a}{b}` with
// numeric a and b and an optional leading sign, `a\times10^{b}` / `a\cdot10^{b}`. Two
// integers compare exactly (a relative tolerance would let 1000000001 equal 1000000000);
// otherwise |x - ref| <= tolerance * max(1, |ref|), the numeric verifier's rule.
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string_view>

namespace moerl::tasks {

// Value of a normalised answer that is a number as described above; nullopt otherwise.
std::optional<double> math_number(std::string_view normalized);

// `answer` against `reference`, both normalised; the tolerance is relative to the reference.
bool math_equal(std::string_view answer, std::string_view reference, double tolerance);

}  // namespace moerl::tasks
