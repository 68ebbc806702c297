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
  testing::ScriptedStream s(testing::slice(prompts, 2, prompts.size()), /*chunk=*/1);
  GenerateConfig c = g;
  c.batch_rows = 3;
  c.stream = &s;
  c.prompt_room = 8;  // the longest prompt of all (the first two are shorter)
  const std::vector<Generation> left = generate(m, testing::slice(prompts, 0, 2), c);
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
  const std::vector<Generation> under_a = generate(a, testing::slice(prompts, 0, 2), g);
  const std::vector<Generation> under_b = generate(b, testing::slice(prompts, 2, 5), g);
  testing::ScriptedStream s(testing::slice(prompts, 2, 5), /*chunk=*/3);
  s.swap_at_first_feed(&a, b.state());
  generate(a, testing::slice(prompts, 0, 2), testing::swap_call(g, s));
  // One decode step per feed on this path: the swap comes after each row's first token.
  EXPECT_EQ(testing::expect_swapped(s, under_a, under_b, 1e-5), (std::vector<int64_t>{1, 1}));
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
