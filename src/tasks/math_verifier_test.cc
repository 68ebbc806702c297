// The math verifier end to end (extraction, normalisation, comparison) on a table of the
// cases MATH/GSM8K-style graders are known to get wrong, plus unit checks of each step.
#include <gtest/gtest.h>

#include "tasks/math_equal.h"
#include "tasks/math_extract.h"
#include "tasks/math_normalize.h"
#include "tasks/task.h"
#include "tasks/verifiers.h"

namespace moerl::tasks {
namespace {

constexpr double kRight = 1.0, kWrong = 0.1, kNone = 0.0;  // kWrong: format_reward

struct Case {
  const char* completion;
  const char* reference;
  double want;
  const char* why;
};

const Case kCases[] = {
    // Numbers in several spellings.
    {R"(\boxed{0.5})", R"(\frac{1}{2})", kRight, "decimal vs fraction"},
    {R"(\boxed{\frac12})", "0.5", kRight, "\\frac12 shorthand"},
    {R"(\boxed{1/2})", R"(\dfrac{1}{2})", kRight, "a/b vs \\dfrac"},
    {R"(\boxed{\tfrac{3}{4}})", "0.75", kRight, "\\tfrac"},
    {R"(\boxed{1,000})", "1000", kRight, "thousands separator"},
    {R"(\boxed{1{,}000})", "1000", kRight, "LaTeX {,} separator"},
    {R"(\boxed{1\,000\,000})", "1000000", kRight, "thin-space separator"},
    {R"(\boxed{(1,2)})", "12", kWrong, "a tuple is not a grouped number"},
    {R"(\boxed{1,2})", "12", kWrong, "a list is not a grouped number"},
    {R"(\boxed{12,34})", "1234", kWrong, "bad grouping stays a list"},
    {R"(\boxed{5.0})", "5", kRight, "trailing zero"},
    {R"(\boxed{5.00})", R"(\$5)", kRight, "dollar sign in the reference"},
    {R"(\boxed{\$5.00})", "5", kRight, "dollar sign in the answer"},
    {R"(\boxed{-0})", "0", kRight, "negative zero"},
    {R"(\boxed{-\frac{1}{2}})", "-0.5", kRight, "signed \\frac"},
    {R"(\boxed{\frac{-1}{2}})", R"(-\frac{1}{2})", kRight, "sign inside \\frac"},
    {R"(\boxed{-5})", "5", kWrong, "sign matters"},
    {R"(\boxed{1e3})", "1000", kRight, "scientific notation"},
    {R"(\boxed{2.5\times10^{3}})", "2500", kRight, "\\times10^{n}"},
    {R"(\boxed{0.333})", R"(\frac{1}{3})", kWrong, "rounded is not equal at tolerance 1e-6"},
    {R"(\boxed{1000000001})", "1000000000", kWrong, "integers compare exactly"},
    {R"(\boxed{+7})", "7", kRight, "explicit plus"},
    {R"(\boxed{007})", "7", kRight, "leading zeros"},
    // Percent, degrees, units.
    {R"(\boxed{10\%})", "10", kRight, "\\% dropped"},
    {R"(\boxed{50%})", R"(50\%)", kRight, "% vs \\%"},
    {R"(\boxed{0.5})", R"(50\%)", kWrong, "percent is not rescaled (documented)"},
    {R"(\boxed{30^\circ})", "30", kRight, "^\\circ"},
    {R"(\boxed{30^{\circ}})", "30", kRight, "^{\\circ}"},
    {"\\boxed{30\xC2\xB0}", "30", kRight, "degree sign"},
    {R"(\boxed{30 \text{ degrees}})", "30", kRight, "degrees word"},
    {R"(\boxed{5 \text{ cm}})", "5", kRight, "\\text unit"},
    {R"(\boxed{5\text{cm}})", "5", kRight, "\\text unit without a space"},
    {R"(\boxed{12 \mbox{ inches}})", "12", kRight, "\\mbox unit"},
    {R"(\boxed{20 \text{ cm}^2})", "20", kRight, "squared unit"},
    {"#### 12 dollars", "12", kRight, "unit word after ####"},
    {R"(\boxed{2x})", "2", kWrong, "a variable is not a unit"},
    // Variables, letters, structure.
    {R"(\boxed{x=3})", "3", kRight, "leading x ="},
    {R"(\boxed{k = -4})", "-4", kRight, "leading k ="},
    {R"(\boxed{x_1 = 2})", "2", kRight, "subscripted variable"},
    {R"(\boxed{x = 1, y = 2})", "1, 2", kWrong, "two assignments are not stripped"},
    {R"(\boxed{y = 2x+1})", "2x + 1", kRight, "assignment with an expression"},
    {R"(\boxed{2x+1})", "1+2x", kWrong, "no algebra (documented)"},
    {R"(\boxed{\text{(A)}})", "A", kRight, "multiple-choice letter"},
    {R"(\boxed{\textbf{(C)}})", "(C)", kRight, "\\textbf letter"},
    {R"(\boxed{B})", "A", kWrong, "other letter"},
    {R"(\boxed{\sqrt2})", R"(\sqrt{2})", kRight, "\\sqrt shorthand"},
    {R"(\boxed{\frac{\sqrt3}2})", R"(\dfrac{\sqrt{3}}{2})", kRight, "nested shorthand"},
    {R"(\boxed{\sqrt{4}})", "2", kWrong, "no evaluation of roots"},
    {R"(\boxed{\pi/2})", "1.5708", kWrong, "no evaluation of pi (documented)"},
    {R"(\boxed{\infty})", "infinity", kRight, "infinity spellings"},
    {"\\boxed{\xE2\x88\x9E}", R"(\infty)", kRight, "unicode infinity"},
    {R"(\boxed{(-\infty, 3]})", R"((-\infty,3])", kRight, "interval, spaces"},
    {R"(\boxed{(-\infty, 3)})", R"((-\infty,3])", kWrong, "interval end differs"},
    {R"(\boxed{\left( 1, \frac{1}{2} \right)})", "(1, 0.5)", kRight, "tuple element-wise, \\left/\\right"},
    {R"(\boxed{(2,1)})", "(1,2)", kWrong, "tuples are ordered"},
    {R"(\boxed{-2, 1})", "1,-2", kRight, "solution lists in any order"},
    {R"(\boxed{1, 2, 3})", "1,2", kWrong, "list length"},
    {R"(\boxed{\mathrm{Paris}})", "Paris", kRight, "\\mathrm unwrapped"},
    {"\\boxed{\xE2\x88\x92" "3}", "-3", kRight, "unicode minus"},
    // Extraction.
    {R"(First \boxed{3}, then I recheck: \boxed{4})", "4", kRight, "last boxed wins"},
    {R"(First \boxed{4}, then I recheck: \boxed{3})", "4", kWrong, "last boxed wins (other way)"},
    {R"($\boxed{\frac{3}{4}}$.)", "0.75", kRight, "nested braces"},
    {R"(\boxed{\frac{\frac{1}{2}}{2}})", R"(\frac{\frac{1}{2}}{2})", kRight, "deeply nested, as strings"},
    {R"(so $\boxed 5$)", "5", kRight, "\\boxed without braces"},
    {R"(\fbox{7})", "7", kRight, "\\fbox"},
    {R"(\boxed{4} and then \boxed{5)", "4", kNone, "unclosed last box: no answer"},
    {R"(\boxed{})", "4", kNone, "empty box"},
    {"Natalia sold 48+24 = 72 clips.\n#### 72", "72", kRight, "GSM8K ####"},
    {"#### 1,234", "1234", kRight, "#### with separator"},
    {"#### -3", "-3", kRight, "#### negative"},
    {"So the answer is 42.", "42", kRight, "answer phrase, trailing period"},
    {"The final answer is $3.5$. I hope it is correct.", "3.5", kRight, "final answer phrase"},
    {"The answer is 3. Wait, no. The answer is 5.", "5", kRight, "last phrase wins"},
    {"The answer is: **12**", "12", kRight, "colon and markdown bold"},
    {"The answer is 7", "#### 7", kRight, "reference ending in ####"},
    {"I am quite sure it is 7", "7", kNone, "no marker: no last-number guess"},
    {"7", "7", kNone, "a bare answer has no marker"},
    {R"(\boxed{7} and the answer is 8)", "7", kRight, "boxed outranks the phrase"},
    {"Janet has 16 - 3 - 4 = 9 eggs... \\boxed{18}", "Janet sells 9 * 2 = $18.\n#### 18", kRight,
     "GSM8K solution as reference"},
    {R"(\boxed{\text{No solution}})", R"(\text{no solution})", kWrong, "strings are case-sensitive"},
};

TEST(MathVerifier, HardCasesTable) {
  VerifierOptions o{.tolerance = 1e-6, .format_reward = kWrong};
  int n = 0;
  for (const Case& c : kCases) {
    EXPECT_EQ(verify(VerifierKind::kMath, c.completion, c.reference, o), c.want)
        << c.why << ": completion [" << c.completion << "] reference [" << c.reference << "] normalised ["
        << normalize_math_answer(extract_math_answer(c.completion).value_or("<none>")) << "] vs ["
        << normalize_math_answer(math_reference_answer(c.reference).value_or("<none>")) << "]";
    ++n;
  }
  EXPECT_GE(n, 50);
}

TEST(MathVerifier, ToleranceIsRelativeToTheReference) {
  VerifierOptions loose{.tolerance = 1e-2, .format_reward = 0};
  EXPECT_EQ(verify(VerifierKind::kMath, R"(\boxed{0.333})", R"(\frac{1}{3})", loose), 1.0);
  EXPECT_EQ(verify(VerifierKind::kMath, R"(\boxed{1009.5})", "1000", loose), 1.0);   // within 1% of 1000
  EXPECT_EQ(verify(VerifierKind::kMath, R"(\boxed{1020.5})", "1000", loose), 0.0);
  EXPECT_EQ(verify(VerifierKind::kMath, R"(\boxed{1001})", "1000", loose), 0.0);     // integers: exact
}

TEST(MathExtract, MarkersAndTheirPriority) {
  EXPECT_EQ(extract_math_answer(R"(\boxed{a{b}c})"), "a{b}c");
  EXPECT_EQ(extract_math_answer(R"(\boxed{\{1,2\}})"), R"(\{1,2\})");  // escaped braces do not nest
  EXPECT_EQ(extract_math_answer("#### 5\n#### 6"), "6");
  EXPECT_EQ(extract_math_answer("the answer is 3.14."), "3.14");
  EXPECT_EQ(extract_math_answer("The answer is (B)! Next"), "(B)");
  EXPECT_EQ(extract_math_answer(R"(\boxedx{3})"), std::nullopt);  // not the \boxed command
  EXPECT_EQ(extract_math_answer("the answer is"), std::nullopt);
  EXPECT_EQ(math_reference_answer("  72 "), "72");
  EXPECT_EQ(math_reference_answer("He pays 3*24 = 72\n#### 72"), "72");
  EXPECT_EQ(math_reference_answer("#### "), std::nullopt);
  EXPECT_EQ(math_reference_answer(""), std::nullopt);
}

TEST(MathNormalize, Rewrites) {
  EXPECT_EQ(normalize_math_answer(R"(x = \dfrac12 \text{ cm}.)"), R"(\frac{1}{2})");
  EXPECT_EQ(normalize_math_answer(R"(\$1{,}000)"), "1000");
  EXPECT_EQ(normalize_math_answer(R"(\text{(B)})"), "B");
  EXPECT_EQ(normalize_math_answer(R"(\frac1{x})"), R"(\frac{1}{x})");
  EXPECT_EQ(normalize_math_answer(R"(\frac\pi2)"), R"(\frac{\pi}{2})");
  EXPECT_EQ(normalize_math_answer(R"(\sqrt[3]2)"), R"(\sqrt[3]{2})");
  EXPECT_EQ(normalize_math_answer(R"(\leftarrow)"), R"(\leftarrow)");  // \left only as a word
  EXPECT_EQ(normalize_math_answer(R"(a \leq b)"), normalize_math_answer(R"(a\le b)"));
  EXPECT_EQ(normalize_math_answer("$ $"), "");
  EXPECT_EQ(normalize_math_answer("-1,234.5"), "-1234.5");
}

TEST(MathEqual, NumbersAndStructure) {
  EXPECT_EQ(math_number(R"(\frac{3}{4})"), 0.75);
  EXPECT_EQ(math_number("-3/4"), -0.75);
  EXPECT_EQ(math_number(R"(\frac{1}{0})"), std::nullopt);
  EXPECT_EQ(math_number(R"(\frac{x}{2})"), std::nullopt);
  EXPECT_EQ(math_number("1/2/3"), std::nullopt);
  EXPECT_TRUE(math_equal("[1,2)", "[1.0,2)", 1e-6));
  EXPECT_FALSE(math_equal("(1)+(2)", "(1)", 1e-6));
  EXPECT_FALSE(math_equal("", "", 1e-6));
  EXPECT_TRUE(math_equal("(1,(2,3))", "(1,(2,3.0))", 1e-6));
}

// Random fragments of LaTeX (unbalanced braces, dangling commands): no crash, no hang,
// rewards in {0, format_reward, 1}, and every answer equals itself.
TEST(MathVerifier, RandomFragmentsAreSafe) {
  const char* pieces[] = {"\\boxed", "\\fbox", "{", "}", "\\frac", "\\sqrt", "[", "]", "(", ")", ",", "1",
                          "23", ".", "-", "/", "$", "\\$", "\\text", "\\left", " ", "x", "=", "%", "^\\circ",
                          "####", "\n", "the answer is ", "cm", "\\", "\xE2\x88"};
  constexpr uint64_t kNumPieces = sizeof(pieces) / sizeof(pieces[0]);
  VerifierOptions o{.tolerance = 1e-6, .format_reward = kWrong};
  for (uint64_t trial = 0; trial < 3000; ++trial) {
    Rng rng{trial};
    std::string text;
    for (uint64_t k = 0, n = 1 + rng.below(14); k < n; ++k) text += pieces[rng.below(kNumPieces)];
    double r = verify(VerifierKind::kMath, text, "12", o);
    EXPECT_TRUE(r == kRight || r == kWrong || r == kNone) << text;
    std::string norm = normalize_math_answer(text);
    if (!norm.empty()) EXPECT_TRUE(math_equal(norm, norm, 1e-6)) << text;
  }
}

}  // namespace
}  // namespace moerl::tasks
