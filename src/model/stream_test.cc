// Streaming generation (GenerateConfig::stream): prompts fed while rows decode give every
// prompt the greedy answer one call with all of them gives, each sequence is handed over once
// as it ends, and weights a stream loads mid-call are used from the next token on and tagged
// in the sequences' weight spans; bad streams and settings are named.
#include <gtest/gtest.h>

#include "model/generate.h"
#include "model/test_stream.h"
#include "model/test_util.h"

namespace moerl::model {
namespace {

std::vector<std::vector<int64_t>> slice(const std::vector<std::vector<int64_t>>& v, size_t from, size_t to) {
  return {v.begin() + static_cast<std::ptrdiff_t>(from), v.begin() + static_cast<std::ptrdiff_t>(to)};
}

GenerateConfig greedy(int64_t max_new) {
  GenerateConfig g;
  g.max_new_tokens = max_new;
  g.sampling.greedy = true;
  g.record_routing = true;
  return g;
}

class Streaming : public ::testing::TestWithParam<std::string> {};

TEST_P(Streaming, FedPromptsGetTheAnswersOfOneCallWithAllOfThem) {
  Model m = init_random(testing::tiny_config(GetParam()), 41);
  const auto prompts = testing::ragged_prompts();
  GenerateConfig g = greedy(9);
  // An EOS this model produces, so rows end at different steps and free rows are refilled.
  g.eos_ids = {generate(m, prompts, g)[1].tokens[2]};
  const std::vector<Generation> all = generate(m, prompts, g);
  testing::ScriptedStream s(slice(prompts, 2, prompts.size()), /*chunk=*/1);
  GenerateConfig c = g;
  c.batch_rows = 3;
  c.stream = &s;
  c.prompt_room = 8;  // the longest prompt of all (the first two are shorter)
  const std::vector<Generation> left = generate(m, slice(prompts, 0, 2), c);
  testing::expect_same_generations(s.in_order(), all, 1e-5, "streamed");
  ASSERT_EQ(s.done.size(), prompts.size());
  for (const Generation& x : left) EXPECT_TRUE(x.tokens.empty()) << "a handed-over sequence is still in the result";
  for (const auto& [i, x] : s.done) EXPECT_EQ(x.weight_spans, (std::vector<Generation::WeightSpan>{{0, 0}})) << i;
  for (int64_t room : s.rooms) EXPECT_EQ(room, 8);
  // Handed over as they ended: a sequence that ended before another started comes first.
  EXPECT_EQ(s.order.size(), prompts.size());
}

TEST_P(Streaming, WeightsLoadedMidCallServeTheNextTokensAndAreTagged) {
  const auto prompts = testing::ragged_prompts();
  Model a = init_random(testing::tiny_config(GetParam()), 42);
  Model b = init_random(testing::tiny_config(GetParam()), 43);
  const GenerateConfig g = greedy(12);
  const std::vector<Generation> under_a = generate(a, slice(prompts, 0, 2), g);
  const std::vector<Generation> under_b = generate(b, slice(prompts, 2, 5), g);
  testing::ScriptedStream s(slice(prompts, 2, 5), /*chunk=*/3);
  s.swap_at_first_feed(&a, b.state());
  GenerateConfig c = g;
  c.batch_rows = 2;
  c.stream = &s;
  c.weights_tag = 1;
  c.prompt_room = 8;
  generate(a, slice(prompts, 0, 2), c);
  ASSERT_EQ(s.done.size(), 5u);
  for (int64_t i : {0, 1}) {
    // Running at the swap: tokens before it are the old weights' answer, the rest tagged 2.
    const Generation& x = s.done.at(i);
    ASSERT_EQ(x.weight_spans.size(), 2u) << i;
    EXPECT_EQ(x.weight_spans[0], (Generation::WeightSpan{0, 1}));
    const int64_t at = x.weight_spans[1].start;
    EXPECT_EQ(x.weight_spans[1].tag, 2u);
    ASSERT_GT(at, 0);
    ASSERT_LT(at, 12);
    EXPECT_EQ(std::vector<int64_t>(x.tokens.begin(), x.tokens.begin() + at),
              std::vector<int64_t>(under_a[i].tokens.begin(), under_a[i].tokens.begin() + at));
  }
  for (int64_t i : {2, 3, 4}) {
    // Started after the swap: wholly the new weights' answer.
    EXPECT_EQ(s.done.at(i).weight_spans, (std::vector<Generation::WeightSpan>{{0, 2}})) << i;
    testing::expect_same_generations({s.done.at(i)}, {under_b[i - 2]}, 1e-5, "after the swap, prompt " + std::to_string(i));
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, Streaming, ::testing::Values("qwen3_moe", "deepseek_v3"));

TEST(StreamingErrors, BadStreamsAndSettingsAreNamed) {
  Model m = init_random(testing::tiny_qwen3(), 44);
  auto expect_error = [&](GenerateConfig g, const std::string& needle) {
    try {
      generate(m, {{1, 2}, {1, 3}}, g);
      FAIL() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  testing::ScriptedStream long_prompt({{1, 2, 3, 4, 5}}, 1);
  GenerateConfig g = greedy(3);
  g.stream = &long_prompt;
  expect_error(g, "needs batch_rows > 0");
  g.batch_rows = 2;
  g.max_new_tokens_per_prompt = {1, 2};
  expect_error(g, "no per-prompt caps");
  g.max_new_tokens_per_prompt.clear();
  // Rows with room for 2-token prompts: a 5-token one cannot be decoded in them.
  expect_error(g, "a stream fed a prompt of 5 tokens into rows with room for 2");
}

}  // namespace
}  // namespace moerl::model
