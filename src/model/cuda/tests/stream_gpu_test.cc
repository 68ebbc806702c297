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
#include "model/test_util.h"

namespace moerl::model {
namespace {

// A bf16 CUDA model with a sharpened head, so greedy choices are not near-ties that bf16
// kernels of other batch shapes could flip.
Model sharp(const std::string& arch, uint64_t seed) {
  cuda::install_cuda_experts();
  Model m = init_random(testing::tiny_config(arch), seed, {at::kBFloat16, at::kCUDA, nullptr});
  at::NoGradGuard ng;
  m.params().at("lm_head.weight").mul_(40.0);
  return m;
}

std::vector<std::vector<int64_t>> slice(const std::vector<std::vector<int64_t>>& v, size_t from, size_t to) {
  return {v.begin() + static_cast<std::ptrdiff_t>(from), v.begin() + static_cast<std::ptrdiff_t>(to)};
}

class FastStreaming : public ::testing::TestWithParam<std::string> {};

TEST_P(FastStreaming, FedPromptsGetTheAnswersOfOneCallWithAllOfThem) {
  Model m = sharp(GetParam(), 61);
  const auto prompts = testing::ragged_prompts();
  GenerateConfig g;
  g.max_new_tokens = 20;
  g.sampling.greedy = true;
  g.record_routing = true;
  g.eos_ids = {cuda::fast_generate(m, prompts, g, true)[1].tokens[4]};  // rows end at different windows
  const std::vector<Generation> all = cuda::fast_generate(m, prompts, g, true);
  testing::ScriptedStream s(slice(prompts, 2, prompts.size()), /*chunk=*/2);
  GenerateConfig c = g;
  c.batch_rows = 3;
  c.stream = &s;
  c.prompt_room = 8;
  cuda::FastGenerateStats st;
  cuda::fast_generate(m, slice(prompts, 0, 2), c, true, &st);
  EXPECT_TRUE(st.used_graph);
  EXPECT_FALSE(st.fell_back);
  testing::expect_same_generations(s.in_order(), all, 0.05, "streamed, graph");
}

TEST_P(FastStreaming, WeightsLoadedBetweenWindowsReachTheGraph) {
  const auto prompts = testing::ragged_prompts();
  Model a = sharp(GetParam(), 62);
  Model b = sharp(GetParam(), 63);
  GenerateConfig g;
  g.max_new_tokens = 20;
  g.sampling.greedy = true;
  const std::vector<Generation> under_a = cuda::fast_generate(a, slice(prompts, 0, 2), g, true);
  const std::vector<Generation> under_b = cuda::fast_generate(b, slice(prompts, 2, 5), g, true);
  testing::ScriptedStream s(slice(prompts, 2, 5), /*chunk=*/3);
  s.swap_at_first_feed(&a, b.state());
  GenerateConfig c = g;
  c.batch_rows = 2;
  c.stream = &s;
  c.weights_tag = 1;
  c.prompt_room = 8;
  cuda::FastGenerateStats st;
  cuda::fast_generate(a, slice(prompts, 0, 2), c, true, &st);
  EXPECT_TRUE(st.used_graph);
  ASSERT_EQ(s.done.size(), 5u);
  for (int64_t i : {0, 1}) {
    const Generation& x = s.done.at(i);
    ASSERT_EQ(x.weight_spans.size(), 2u) << i;
    const int64_t at = x.weight_spans[1].start;
    EXPECT_EQ(at, 8) << "the first feed comes after one window of decode steps";
    EXPECT_EQ(std::vector<int64_t>(x.tokens.begin(), x.tokens.begin() + at),
              std::vector<int64_t>(under_a[i].tokens.begin(), under_a[i].tokens.begin() + at));
  }
  for (int64_t i : {2, 3, 4}) {
    EXPECT_EQ(s.done.at(i).weight_spans, (std::vector<Generation::WeightSpan>{{0, 2}})) << i;
    testing::expect_same_generations({s.done.at(i)}, {under_b[i - 2]}, 0.05, "after the swap, prompt " + std::to_string(i));
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, FastStreaming, ::testing::Values("qwen3_moe", "deepseek_v3"));

}  // namespace
}  // namespace moerl::model
