// The CUDA-graph generation path (fast_generate) with continuous batching and shared prefill:
// greedy answers of a few refilled rows equal static batching's token for token (and their
// routing records), in the graph and eagerly, for the head cache (Qwen3-MoE) and the latent
// cache (DeepSeek-V3's MLA); a GRPO batch's shared prefill equals prefilling every row.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include "model/cuda/fast_generate.h"
#include "model/cuda/moe_gpu.h"
#include "model/generate.h"
#include "model/prefill.h"
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

// A prefill token budget (GenerateConfig::prefill_tokens) forwards 128 prompts of 100 tokens in
// chunks of 16 rows: the same cache and logits as one forward, in a fraction of its peak memory
// (one forward of a large batch's prompts ran an H100 out of memory at Qwen3-30B-A3B's shape);
// greedy generation under the budget equals one forward's token for token.
TEST_P(FastContinuous, PrefillUnderATokenBudgetEqualsOneForwardInLessMemory) {
  io::HfConfig cfg = testing::tiny_config(GetParam());
  cfg.max_position_embeddings = 512;
  Model m = testing::sharp_cuda(cfg, 33);
  std::vector<std::vector<int64_t>> prompts(128);
  for (size_t b = 0; b < prompts.size(); ++b) {
    for (int64_t t = 0; t < 100; ++t) prompts[b].push_back(1 + static_cast<int64_t>((b * 131 + t * 17) % 49));
  }
  auto peak = [] { return c10::cuda::CUDACachingAllocator::getDeviceStats(0).allocated_bytes[0].peak; };
  auto prefill = [&](int64_t budget, int64_t& bytes) {
    c10::InferenceMode guard;
    c10::cuda::CUDACachingAllocator::emptyCache();
    c10::cuda::CUDACachingAllocator::resetPeakStats(0);
    const int64_t base = peak();
    Prefill p = prefill_prompts(m, prompts, 0, 8, /*share=*/false, budget, nullptr);
    bytes = peak() - base;
    return p;
  };
  int64_t whole_bytes = 0, chunked_bytes = 0;
  const Prefill whole = prefill(0, whole_bytes), chunked = prefill(1600, chunked_bytes);
  std::printf("prefill peak over the weights: one forward %.2f MB, 16-row chunks %.2f MB\n", whole_bytes / 1e6,
              chunked_bytes / 1e6);
  EXPECT_LT(chunked_bytes, whole_bytes / 2);
  EXPECT_TRUE(chunked.cache.valid.equal(whole.cache.valid));
  EXPECT_LT(::moerl::testing::rel_err(chunked.logits_BV, whole.logits_BV), 1e-2);
  const auto& a = chunked.cache.latent.empty() ? chunked.cache.k : chunked.cache.latent;
  const auto& b = whole.cache.latent.empty() ? whole.cache.k : whole.cache.latent;
  for (size_t l = 0; l < a.size(); ++l) EXPECT_LT(::moerl::testing::rel_err(a[l], b[l]), 1e-2) << "layer " << l;
  GenerateConfig g;
  g.max_new_tokens = 8;
  g.sampling.greedy = true;
  g.prefill_tokens = 0;
  GenerateConfig c = g;
  c.prefill_tokens = 1600;
  std::vector<std::vector<int64_t>> few(prompts.begin(), prompts.begin() + 40);
  testing::expect_same_generations(cuda::fast_generate(m, few, c, true), cuda::fast_generate(m, few, g, true), 0.05,
                                   "prefill in chunks");
}

INSTANTIATE_TEST_SUITE_P(Archs, FastContinuous, ::testing::Values("qwen3_moe", "deepseek_v3"));

}  // namespace
}  // namespace moerl::model
