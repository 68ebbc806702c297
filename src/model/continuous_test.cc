// Continuous batching (GenerateConfig::batch_rows): a few rows decode many prompts, each
// finished row refilled at once with the next prompt, and every prompt's greedy answer equals
// what static batching (all prompts at once) gives: tokens, logprobs, finish reasons and
// routing records, for the head cache (Qwen3-MoE) and the latent cache (DeepSeek-V3's MLA).
// The caps are skewed so refilled rows held longer sequences before (stale slots must not
// leak), and prompts repeat so refills share their prefill.
#include <gtest/gtest.h>

#include "model/generate.h"
#include "model/slot_table.h"
#include "model/test_util.h"

namespace moerl::model {
namespace {

GenerateConfig skewed_greedy() {
  GenerateConfig g;
  g.max_new_tokens = 9;
  g.sampling.greedy = true;
  g.record_routing = true;
  g.max_new_tokens_per_prompt = {2, 9, 3, 1, 9, 4, 2, 7, 5};
  return g;
}

class ContinuousBatching : public ::testing::TestWithParam<std::string> {};

TEST_P(ContinuousBatching, GreedyEqualsStaticBatching) {
  Model m = init_random(testing::tiny_config(GetParam()), 21);
  const auto prompts = testing::ragged_prompts();
  const GenerateConfig g = skewed_greedy();
  const std::vector<Generation> all = generate(m, prompts, g);
  for (size_t s = 0; s < prompts.size(); ++s) {
    EXPECT_EQ(static_cast<int64_t>(all[s].tokens.size()), g.max_new_tokens_per_prompt[s]) << "prompt " << s;
  }
  for (int64_t rows : {1, 2, 3, 8}) {
    GenerateConfig c = g;
    c.batch_rows = rows;
    testing::expect_same_generations(generate(m, prompts, c), all, 1e-5, std::to_string(rows) + " rows");
    c.share_prefill = false;
    testing::expect_same_generations(generate(m, prompts, c), all, 1e-5,
                                     std::to_string(rows) + " rows, no shared prefill");
  }
}

TEST_P(ContinuousBatching, EosAndStopEndRowsAsInStaticBatching) {
  Model m = init_random(testing::tiny_config(GetParam()), 22);
  const auto prompts = testing::ragged_prompts();
  GenerateConfig g = skewed_greedy();
  g.max_new_tokens_per_prompt.clear();
  // An EOS and a stop token that this model does produce, so some rows end early.
  const std::vector<Generation> free_run = generate(m, prompts, g);
  g.eos_ids = {free_run[1].tokens[2]};
  const int64_t stop_token = free_run[4].tokens[1];
  g.stop = [stop_token](const std::vector<int64_t>& t) { return t.back() == stop_token; };
  const std::vector<Generation> all = generate(m, prompts, g);
  int ended_early = 0;
  for (const Generation& x : all) ended_early += x.finish != FinishReason::kLength;
  EXPECT_GE(ended_early, 2);
  GenerateConfig c = g;
  c.batch_rows = 2;
  testing::expect_same_generations(generate(m, prompts, c), all, 1e-5, "2 rows");
}

INSTANTIATE_TEST_SUITE_P(Archs, ContinuousBatching, ::testing::Values("qwen3_moe", "deepseek_v3"));

TEST(ContinuousBatchingErrors, BadSettingsAreNamed) {
  Model m = init_random(testing::tiny_qwen3(), 23);
  auto expect_error = [&](GenerateConfig g, const std::string& needle) {
    try {
      generate(m, {{1, 2}, {1, 3}, {1}}, g);
      FAIL() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  GenerateConfig g;
  g.max_new_tokens = 4;
  g.batch_rows = -1;
  expect_error(g, "batch_rows=-1");
  g.batch_rows = 2;
  g.max_new_tokens_per_prompt = {1, 2};
  expect_error(g, "2 entries for 3 prompts");
  g.max_new_tokens_per_prompt = {1, 5, 2};
  expect_error(g, "max_new_tokens_per_prompt[1] = 5");
  g.max_new_tokens_per_prompt.clear();
  g.all_done = [](bool done) { return done; };
  expect_error(g, "under expert-parallel lockstep");
  g.all_done = nullptr;
  try {
    generate(m, {{1, 2}, {1, 3}, {}}, g);
    FAIL() << "no error for an empty prompt";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("prompt 2 is empty"), std::string::npos) << e.what();
  }
}

TEST(SlotTable, RefillsInInputOrderAndEndsAtTheCap) {
  GenerateConfig g;
  g.max_new_tokens = 3;
  g.eos_ids = {9};
  g.max_new_tokens_per_prompt = {1, 3, 2};
  SlotTable t(3, 2, g);
  EXPECT_EQ(t.admit(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(t.push(0, 5, 0.f, 0.f), 0);  // cap 1
  EXPECT_EQ(t.push(1, 5, 0.f, 0.f), -1);
  EXPECT_EQ(t.admit(), (std::vector<int64_t>{0}));
  EXPECT_EQ(t.sequence(0), 2);
  EXPECT_FALSE(t.waiting());
  EXPECT_EQ(t.push(1, 9, 0.f, 0.f), 1);  // EOS
  EXPECT_EQ(t.push(0, 4, 0.f, 0.f), -1);
  EXPECT_EQ(t.push(0, 4, 0.f, 0.f), 2);
  EXPECT_EQ(t.running(), 0);
  std::vector<Generation> out = t.take();
  EXPECT_EQ(out[0].finish, FinishReason::kLength);
  EXPECT_EQ(out[1].finish, FinishReason::kEos);
  EXPECT_EQ(out[1].tokens, (std::vector<int64_t>{5, 9}));
  EXPECT_EQ(out[2].tokens, (std::vector<int64_t>{4, 4}));
}

}  // namespace
}  // namespace moerl::model
