// Streaming generation on the CUDA-graph path: prompts fed between decode windows get the
// greedy answers one call with all of them gives, token for token; weights a stream loads
// between windows reach the captured graph (its stacked q/k/v and expert copies are refilled
// in place): sequences started after the swap answer as the new weights do alone, and the
// tokens before the swap are the old weights'.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "model/cuda/fast_generate.h"
#include "model/cuda/moe_gpu.h"
#include "model/generate.h"
#include "model/test_stream.h"
#include "model/cuda/tests/gpu_test_util.h"
#include "model/test_util.h"

namespace moerl::model {
namespace {

class FastStreaming : public ::testing::TestWithParam<std::string> {};

TEST_P(FastStreaming, FedPromptsGetTheAnswersOfOneCallWithAllOfThem) {
  Model m = testing::sharp_cuda(GetParam(), 61);
  const auto prompts = testing::ragged_prompts();
  GenerateConfig g;
  g.max_new_tokens = 20;
  g.sampling.greedy = true;
  g.record_routing = true;
  g.eos_ids = {cuda::fast_generate(m, prompts, g, true)[1].tokens[4]};  // rows end at different windows
  const std::vector<Generation> all = cuda::fast_generate(m, prompts, g, true);
  testing::ScriptedStream s(testing::slice(prompts, 2, prompts.size()), /*chunk=*/2);
  GenerateConfig c = g;
  c.batch_rows = 3;
  c.stream = &s;
  c.prompt_room = 8;
  cuda::FastGenerateStats st;
  cuda::fast_generate(m, testing::slice(prompts, 0, 2), c, true, &st);
  EXPECT_TRUE(st.used_graph);
  EXPECT_FALSE(st.fell_back);
  testing::expect_same_generations(s.in_order(), all, 0.05, "streamed, graph");
}

TEST_P(FastStreaming, WeightsLoadedBetweenWindowsReachTheGraph) {
  const auto prompts = testing::ragged_prompts();
  Model a = testing::sharp_cuda(GetParam(), 62);
  Model b = testing::sharp_cuda(GetParam(), 63);
  GenerateConfig g;
  g.max_new_tokens = 20;
  g.sampling.greedy = true;
  const std::vector<Generation> under_a = cuda::fast_generate(a, testing::slice(prompts, 0, 2), g, true);
  const std::vector<Generation> under_b = cuda::fast_generate(b, testing::slice(prompts, 2, 5), g, true);
  testing::ScriptedStream s(testing::slice(prompts, 2, 5), /*chunk=*/3);
  s.swap_at_first_feed(&a, b.state());
  cuda::FastGenerateStats st;
  cuda::fast_generate(a, testing::slice(prompts, 0, 2), testing::swap_call(g, s), true, &st);
  EXPECT_TRUE(st.used_graph);
  // The first feed comes after one window of 8 decode steps.
  EXPECT_EQ(testing::expect_swapped(s, under_a, under_b, 0.05), (std::vector<int64_t>{8, 8}));
}

INSTANTIATE_TEST_SUITE_P(Archs, FastStreaming, ::testing::Values("qwen3_moe", "deepseek_v3"));

}  // namespace
}  // namespace moerl::model
