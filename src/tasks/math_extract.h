// Final-answer extraction for the math verifier: finds the answer a MATH/GSM8K-style
// completion (or reference solution) commits to. It does not normalise or compare
// (math_normalize.h, math_equal.h).
//
//   extract_math_answer("... so \\boxed{\\frac{3}{4}}.")   -> "\\frac{3}{4}"
//   extract_math_answer("...\n#### 1,234")                 -> "1,234"
//   extract_math_answer("Thus the answer is 7. Done")      -> "7"
//   extract_math_answer("I think it is 7")                 -> nullopt (no marker, no guess)
// Markers, by priority (the first kind present decides; within a kind the last one wins):
//   1. \boxed{...} / \fbox{...} (nested braces), \boxed 5 (no braces: up to '$' or the line
//      end). An unclosed last \boxed{ (a truncated completion) yields nullopt, not an
//      earlier box: the model had not finished its final answer.
//   2. GSM8K's "#### N": the rest of that line.
//   3. "the answer is X" / "the final answer is X" (case-insensitive, optional ':'): X up
//      to the end of the line or sentence ('.', '!' or '?' followed by a space or the end).
// NOTE: there is no last-number fallback: rewarding the last number in free text teaches
// a policy to end with guesses and scores chains of reasoning by their last intermediate.
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace moerl::tasks {

// The raw (unnormalised) final answer of `text`, trimmed; nullopt if no marker is found or
// the chosen marker holds nothing.
std::optional<std::string> extract_math_answer(std::string_view text);

// A dataset reference: the extracted answer if the text carries a marker (a GSM8K
// solution ending in "#### 72", a MATH solution with \boxed), else the whole text trimmed.
// nullopt only when a marker is present but holds nothing.
std::optional<std::string> math_reference_answer(std::string_view reference);

}  // namespace moerl::tasks
