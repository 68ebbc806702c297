// Added tokens cut out of the text before the model (tokenizers' AddedVocabulary rules):
// lstrip/rstrip swallow whitespace into the token, single_word rejects matches inside a word
// (and a rejected match is not searched again), normalized tokens match the normalized text,
// the longest of the matches starting leftmost wins.
#include <gtest/gtest.h>

#include "model/tokenizer/test_data.h"
#include "model/tokenizer/tiny_tokenizers.h"

namespace moerl::model {
namespace {

using Ids = std::vector<int64_t>;

nlohmann::json added(int id, const std::string& content, nlohmann::json flags = nlohmann::json::object()) {
  nlohmann::json t = {{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false},
                      {"rstrip", false}, {"normalized", false}, {"special", false}};
  for (auto it = flags.begin(); it != flags.end(); ++it) t[it.key()] = it.value();
  return t;
}

std::unique_ptr<HfTokenizer> with_added(const std::string& name, nlohmann::json tokens,
                                        nlohmann::json normalizer = nullptr) {
  nlohmann::json j = testing::tiny_byte_level_json();
  j["added_tokens"] = std::move(tokens);
  j["normalizer"] = std::move(normalizer);
  return HfTokenizer::load(testing::write_tokenizer_dir(name, {{"tokenizer.json", j.dump()}}));
}

TEST(AddedTokens, LstripAndRstripSwallowWhitespace) {
  auto plain = with_added("plain", {added(300, "[A]")});
  EXPECT_EQ(plain->encode("x [A]y", false), (Ids{'x', ' ', 300, 'y'}));  // the space is its own piece
  auto l = with_added("lstrip", {added(300, "[A]", {{"lstrip", true}})});
  EXPECT_EQ(l->encode("x \t[A]y", false), (Ids{'x', 300, 'y'}));
  EXPECT_EQ(l->decode(l->encode("x \t[A]y", false)), "x[A]y");  // the whitespace went into the token
  auto r = with_added("rstrip", {added(301, "[B]", {{"rstrip", true}})});
  EXPECT_EQ(r->encode("[B] \u3000 z", false), (Ids{301, 'z'}));  // U+3000 is White_Space too
  // rstrip then lstrip on the same whitespace: the first token keeps it.
  auto both = with_added("both", {added(300, "[A]", {{"lstrip", true}, {"rstrip", true}})});
  EXPECT_EQ(both->encode("[A] [A]", false), (Ids{300, 300}));
}

TEST(AddedTokens, SingleWordRejectsMatchesInsideWords) {
  auto tok = with_added("single", {added(302, "ab", {{"single_word", true}})});
  // "ab" alone, "cab" (a letter before), "ab." (punctuation after is not a word character).
  EXPECT_EQ(tok->encode("ab cab ab.", false), (Ids{302, ' ', 'c', 'a', 'b', ' ', 302, '.'}));
  EXPECT_EQ(tok->encode("abé", false), (Ids{'a', 'b', 0xC3, 0xA9}));       // é is a letter
  EXPECT_EQ(tok->encode("ab\xCC\x81", false), (Ids{'a', 'b', 0xCC, 0x81}));  // a combining mark is a word character
  EXPECT_EQ(tok->encode("ab_", false), (Ids{'a', 'b', '_'}));                // so is '_' (\w)
  EXPECT_EQ(tok->encode("ab-", false), (Ids{302, '-'}));
}

TEST(AddedTokens, LeftmostThenLongestMatchWins) {
  auto tok = with_added("longest", {added(303, "<a>"), added(304, "<a><b>"), added(305, "a><")});
  EXPECT_EQ(tok->encode("<a><b>", false), (Ids{304}));
  EXPECT_EQ(tok->encode("<a><c>", false), (Ids{303, '<', 'c', '>'}));  // leftmost beats "a><"
  EXPECT_EQ(tok->encode("x<a><b><a>", false), (Ids{'x', 304, 303}));
}

TEST(AddedTokens, NormalizedTokensMatchTheNormalizedText) {
  const nlohmann::json lower_q = {{"type", "Replace"}, {"pattern", {{"String", "Q"}}}, {"content", "q"}};
  auto tok = with_added("normalized",
                        {added(306, "Qq", {{"normalized", true}}),  // matched as "qq" after normalization
                         added(307, "QX", {{"normalized", false}})},
                        lower_q);
  EXPECT_EQ(tok->encode("aQQb", false), (Ids{'a', 306, 'b'}));
  EXPECT_EQ(tok->encode("aqqb", false), (Ids{'a', 306, 'b'}));
  EXPECT_EQ(tok->encode("QX", false), (Ids{307}));   // raw match, before Q -> q
  EXPECT_EQ(tok->encode("qX", false), (Ids{'q', 'X'}));
}

TEST(AddedTokens, SpecialTokensWrittenInTheTextAreAlwaysMatched) {
  auto tok = with_added("special", {added(308, "<|end|>", {{"special", true}})});
  EXPECT_EQ(tok->encode("hello<|end|>hello", false), (Ids{259, 308, 259}));
  EXPECT_EQ(tok->encode("<|end|><|end|>", false), (Ids{308, 308}));
  EXPECT_EQ(tok->encode("<|end|", false), (Ids{'<', '|', 'e', 'n', 'd', '|'}));
}

}  // namespace
}  // namespace moerl::model
