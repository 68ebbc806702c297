// Pre-tokenizers and regexes: Split's five delimiter behaviours on the example the
// tokenizers documentation gives for them, invert, Sequence, ByteLevel's prefix space, and
// the regex engine's Oniguruma-compatible corners (\s, empty matches).
#include <gtest/gtest.h>

#include "model/tokenizer/pre_tokenizer.h"
#include "model/tokenizer/regex.h"

namespace moerl::model::hf {
namespace {

using Strings = std::vector<std::string>;

Strings run(const nlohmann::json& j, const std::string& text) {
  auto p = parse_pre_tokenizer(j, {"test.json", "pre_tokenizer"});
  Pieces pieces;
  pieces.items = {text};
  p->pre_tokenize(pieces);
  return {pieces.items.begin(), pieces.items.end()};
}

nlohmann::json split(const char* behavior, bool invert = false) {
  return {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", invert}};
}

TEST(PreTokenizer, SplitBehaviours) {
  const std::string text = "the-final--countdown";
  EXPECT_EQ(run(split("Removed"), text), (Strings{"the", "final", "countdown"}));
  EXPECT_EQ(run(split("Isolated"), text), (Strings{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(run(split("MergedWithPrevious"), text), (Strings{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(run(split("MergedWithNext"), text), (Strings{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(run(split("Contiguous"), text), (Strings{"the", "-", "final", "--", "countdown"}));
  EXPECT_EQ(run(split("Removed", /*invert=*/true), text), (Strings{"-", "-", "-"}));
  EXPECT_EQ(run(split("Isolated"), ""), Strings{});
  EXPECT_EQ(run(split("Isolated"), "---"), (Strings{"-", "-", "-"}));
}

TEST(PreTokenizer, RegexSplitAndSequence) {
  const nlohmann::json digits = {{"type", "Split"}, {"pattern", {{"Regex", "\\p{N}{1,3}"}}}, {"behavior", "Isolated"}};
  EXPECT_EQ(run(digits, "a1234567b٣٤"), (Strings{"a", "123", "456", "7", "b", "٣٤"}));
  const nlohmann::json seq = {{"type", "Sequence"},
                              {"pretokenizers", {digits, {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Removed"}}}}};
  EXPECT_EQ(run(seq, "x 12345 y"), (Strings{"x", "123", "45", "y"}));
}

TEST(PreTokenizer, ByteLevelPrefixSpaceAndGpt2Split) {
  const nlohmann::json bl = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  // Mapped to the byte-level alphabet: a space is "Ġ".
  EXPECT_EQ(run(bl, "Hello world's"), (Strings{"ĠHello", "Ġworld", "'s"}));
  EXPECT_EQ(run(bl, " x"), (Strings{"Ġx"}));  // already starts with a space: none added
  bool byte_level = false;
  auto deferred = defer_byte_mapping(parse_pre_tokenizer(bl, {"t", "p"}), byte_level);
  EXPECT_TRUE(byte_level);
  Pieces pieces;
  pieces.items = {"é x"};
  deferred->pre_tokenize(pieces);
  EXPECT_EQ(Strings(pieces.items.begin(), pieces.items.end()), (Strings{" é", " x"}));  // raw bytes: the model maps them
  defer_byte_mapping(parse_pre_tokenizer(split("Isolated"), {"t", "p"}), byte_level);
  EXPECT_FALSE(byte_level);
}

std::vector<std::pair<size_t, size_t>> matches(const std::string& pattern, const std::string& text) {
  Regex re(pattern, "test");
  std::vector<Span> spans;
  re.find_all(text, spans);
  std::vector<std::pair<size_t, size_t>> out;
  for (const Span& s : spans) out.emplace_back(s.begin, s.end);
  return out;
}

TEST(Regex, WhitespaceIsUnicodeWhiteSpaceAsInOniguruma) {
  using M = std::vector<std::pair<size_t, size_t>>;
  EXPECT_EQ(matches("\\s+", "a \t\u3000\u0085b"), (M{{1, 8}}));
  EXPECT_EQ(matches("\\s", "\u180E"), M{});      // PCRE2's own \s would match U+180E
  EXPECT_EQ(matches("\\S+", "\u180E"), (M{{0, 3}}));
  EXPECT_EQ(matches("[^\\s]+", "a b"), (M{{0, 1}, {2, 3}}));
  EXPECT_EQ(matches("\\\\s", "\\s s"), (M{{0, 2}}));  // an escaped backslash then 's' stays literal
  EXPECT_EQ(oniguruma_whitespace("\\Q\\s\\E\\s"), "\\Q\\s\\E\\p{White_Space}");
}

TEST(Regex, EmptyMatchesFollowOniguruma) {
  using M = std::vector<std::pair<size_t, size_t>>;
  // After "aa" ends at 3, the empty match at 3 is skipped (the search resumes one character on).
  EXPECT_EQ(matches("a*", "baab"), (M{{0, 0}, {1, 3}, {4, 4}}));
  EXPECT_EQ(matches("x*", ""), (M{{0, 0}}));
  EXPECT_EQ(matches("(?i:'s|'t)", "it'S o'T"), (M{{2, 4}, {6, 8}}));
}

TEST(Regex, LongRunsDoNotExhaustTheStack) {
  // A megabyte of spaces before a word: the run minus its last space, then that space.
  using M = std::vector<std::pair<size_t, size_t>>;
  const size_t n = 1 << 20;
  EXPECT_EQ(matches("\\s+(?!\\S)|\\s+", std::string(n, ' ') + "x"), (M{{0, n - 1}, {n - 1, n}}));
}

}  // namespace
}  // namespace moerl::model::hf
