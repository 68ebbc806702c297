// Normalisation of an extracted math answer to a canonical string, so that the spellings
// graders of MATH/GSM8K-style sets see for one value compare equal. No algebra: it
// rewrites notation, never evaluates (comparison: math_equal.h).
//
//   normalize_math_answer("x = \\dfrac12 \\text{ cm}.")   -> "\\frac{1}{2}"
//   normalize_math_answer("\\$1{,}000")                   -> "1000"
//   normalize_math_answer("\\text{(B)}")                  -> "B"
// Rules, in order:
//   - math delimiters `$`, `\(`, `\)`, `\[`, `\]` and dollar signs `\$`, `\dollar` removed;
//     surrounding `**` (markdown bold) removed; `−` -> `-`, `∞` -> `\infty`, `π` -> `\pi`
//   - `\text`, `\textbf`, `\textit`, `\textrm`, `\mathrm`, `\mathbf`, `\mathit`, `\mbox`,
//     `\operatorname`, `\boxed` unwrapped (`5\text{cm}` -> `5 cm`: a space keeps units apart)
//   - `\left`, `\right`, `\displaystyle`, spacing `\!` `\,` `\;` `\:` `\ ` `\quad` `\qquad`
//     removed; `{,}` -> `,`; `\dfrac`/`\tfrac` -> `\frac`; `\leq`/`\geq` -> `\le`/`\ge`
//   - `\frac12` -> `\frac{1}{2}`, `\sqrt2` -> `\sqrt{2}` (single-token arguments braced)
//   - degrees `^\circ`, `^{\circ}`, `\circ`, `\degree`, `°` removed; percent `\%`, `%`
//     removed: `50\%` equals `50`. NOTE: not 0.5: a reference of 50% and an answer of 0.5
//     do not match, since accepting both scales would also accept answers 100x off.
//   - trailing periods; a leading single-variable assignment (`x =`, `k=`, `x_1 =`,
//     `\theta =`) when the answer holds only that one `=`
//   - units: words (2+ letters, optional `^2`/`^3`) after a value that ends in a digit or a
//     closing bracket, and a space, are dropped
//     (`5 cm`, `12 dollars`, `5 \text{ inches}`, `30 degrees`); `2x` keeps its `x`
//   - all whitespace removed; `1,000,000` -> `1000000` only when the whole answer is one
//     correctly grouped number (`(1,2)` and `1,2` stay lists)
//   - `(A)` -> `A` (multiple-choice letter); `inf`, `infinity`, `+\infty` -> `\infty`
// Not handled (compares as different strings): `\pi/2` vs `1.5708`, `2x+1` vs `1+2x`,
// `\frac{\pi}{2}` vs `\pi/2`, mixed numbers `2\frac{1}{2}`, sets `\{1,2\}` in another order,
// case (`a` vs `A`). Pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace moerl::tasks {

// Canonical form of `answer` (possibly empty when nothing is left, e.g. "$ $").
std::string normalize_math_answer(std::string_view answer);

}  // namespace moerl::tasks
