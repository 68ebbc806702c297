// The CUDA-graph generation path (fast_generate) with continuous batching and shared prefill:
// greedy answers of a few refilled rows equal static batching's token for token (and their
// routing records), in the graph and eagerly, for the head cache (Qwen3-MoE) and the latent
// cache (DeepSeek-V3's MLA); a GRPO batch's shared prefill equals prefilling every row.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "model/cuda/fast_generate.h"
#include "model/cuda/moe_gpu.h"
#include "model/generate.h"
#include "model/cuda/tests/gpu_test_util.h"
#include "model/test_util.h"

namespace moerl::model {
namespace {

class FastContinuous : public ::testing::TestWithParam<std::string> {};

TEST_P(FastContinuous, GreedyEqualsStaticBatchingTokenForToken) {
  Model m = testing::sharp_cuda(GetParam(), 31);
  GenerateConfig g;
  g.max_new_tokens = 20;
  g.sampling.greedy = true;
  g.record_routing = true;
  g.max_new_tokens_per_prompt = {3, 20, 5, 1, 17, 9, 2, 12, 6};
  cuda::FastGenerateStats st;
  const std::vector<Generation> all = cuda::fast_generate(m, testing::ragged_prompts(), g, true, &st);
  EXPECT_TRUE(st.used_graph);
  EXPECT_FALSE(st.fell_back);
  for (size_t s = 0; s < all.size(); ++s) {
    EXPECT_EQ(static_cast<int64_t>(all[s].tokens.size()), g.max_new_tokens_per_prompt[s]) << "prompt " << s;
  }
  for (int64_t rows : {1, 2, 3}) {
    GenerateConfig c = g;
    c.batch_rows = rows;
    cuda::FastGenerateStats cs;
    const std::string what = std::to_string(rows) + " rows";
    testing::expect_same_generations(cuda::fast_generate(m, testing::ragged_prompts(), c, true, &cs), all, 0.05,
                                     what + ", graph");
    EXPECT_TRUE(cs.used_graph);
    testing::expect_same_generations(cuda::fast_generate(m, testing::ragged_prompts(), c, false), all, 0.05,
                                     what + ", eager");
  }
  // An EOS this model produces ends some rows early; the refills still match.
  g.max_new_tokens_per_prompt.clear();
  g.eos_ids = {all[1].tokens[4]};
  const std::vector<Generation> eos_all = cuda::fast_generate(m, testing::ragged_prompts(), g, true);
  GenerateConfig c = g;
  c.batch_rows = 2;
  testing::expect_same_generations(cuda::fast_generate(m, testing::ragged_prompts(), c, true), eos_all, 0.05,
                                   "2 rows with EOS");
}

TEST_P(FastContinuous, SharedPrefillEqualsPrefillingEveryRow) {
  Model m = testing::sharp_cuda(GetParam(), 32);
  std::vector<std::vector<int64_t>> grouped;
  for (int g = 0; g < 4; ++g) {
    for (const auto& p : {std::vector<int64_t>{1, 7, 9, 3, 12}, {1, 4}, {1, 30, 2, 8}}) grouped.push_back(p);
  }
  GenerateConfig g;
  g.max_new_tokens = 10;
  g.sampling.greedy = true;
  g.record_routing = true;
  GenerateConfig each = g;
  each.share_prefill = false;
  testing::expect_same_generations(cuda::fast_generate(m, grouped, g, true), cuda::fast_generate(m, grouped, each, true),
                                   0.05, "shared prefill");
}

INSTANTIATE_TEST_SUITE_P(Archs, FastContinuous, ::testing::Values("qwen3_moe", "deepseek_v3"));

}  // namespace
}  // namespace moerl::model
