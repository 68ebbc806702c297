// Shared prefill (model/prefill.h): a batch holding each prompt several times, in mixed order
// and of ragged lengths, forwards each distinct prompt once, and generate() then returns what
// prefilling every row gives: the same tokens, logprobs and routing records, greedy and
// sampled, for the head cache (Qwen3-MoE) and the latent cache (DeepSeek-V3's MLA).
#include <gtest/gtest.h>

#include "model/generate.h"
#include "model/prefill.h"
#include "model/test_util.h"

namespace moerl::model {
namespace {

// Three prompts, G = 4 copies each, interleaved: a GRPO batch after shuffling.
std::vector<std::vector<int64_t>> grouped_prompts() {
  const std::vector<std::vector<int64_t>> p = {{1, 7, 9, 3, 12}, {1, 4}, {1, 30, 2, 8}};
  std::vector<std::vector<int64_t>> out;
  for (int g = 0; g < 4; ++g) {
    for (size_t i = 0; i < p.size(); ++i) out.push_back(p[(i + g) % p.size()]);
  }
  return out;
}

class SharedPrefill : public ::testing::TestWithParam<std::string> {};

TEST_P(SharedPrefill, CacheRowsEqualPrefillingEveryRow) {
  Model m = init_random(testing::tiny_config(GetParam()), 3);
  c10::InferenceMode guard;
  auto prompts = grouped_prompts();
  Prefill shared = prefill_prompts(m, prompts, 0, 7, /*share=*/true, 0, nullptr);
  Prefill each = prefill_prompts(m, prompts, 0, 7, /*share=*/false, 0, nullptr);
  EXPECT_EQ(shared.unique_rows, 3);
  EXPECT_EQ(each.unique_rows, 12);
  EXPECT_EQ(shared.cache.length, each.cache.length);
  EXPECT_TRUE(shared.cache.valid.equal(each.cache.valid));
  EXPECT_TRUE(shared.cache.next_pos.equal(each.cache.next_pos));
  EXPECT_LT(testing::max_abs_diff(shared.logits_BV, each.logits_BV), 1e-5);
  const auto& a = shared.cache.latent.empty() ? shared.cache.k : shared.cache.latent;
  const auto& b = each.cache.latent.empty() ? each.cache.k : each.cache.latent;
  ASSERT_EQ(a.size(), b.size());
  for (size_t l = 0; l < a.size(); ++l) EXPECT_LT(testing::max_abs_diff(a[l], b[l]), 1e-5) << "layer " << l;
}

TEST_P(SharedPrefill, GenerateEqualsPrefillingEveryRow) {
  Model m = init_random(testing::tiny_config(GetParam()), 4);
  for (bool greedy : {true, false}) {
    GenerateConfig g;
    g.max_new_tokens = 6;
    g.sampling.greedy = greedy;
    g.seed = 11;
    g.record_routing = true;
    GenerateConfig each = g;
    each.share_prefill = false;
    auto prompts = grouped_prompts();
    std::vector<Generation> x = generate(m, prompts, g), y = generate(m, prompts, each);
    ASSERT_EQ(x.size(), y.size());
    for (size_t r = 0; r < x.size(); ++r) {
      EXPECT_EQ(x[r].tokens, y[r].tokens) << "row " << r << (greedy ? " greedy" : " sampled");
      EXPECT_EQ(x[r].routed_experts, y[r].routed_experts) << "row " << r;
      ASSERT_EQ(x[r].logprobs.size(), y[r].logprobs.size());
      for (size_t t = 0; t < x[r].logprobs.size(); ++t) EXPECT_NEAR(x[r].logprobs[t], y[r].logprobs[t], 1e-5);
    }
  }
}

// A token budget splits the forwarded rows into chunks (1 row of the 5-slot prompts at 5 or 9
// tokens, 2 at 10); each chunk writes its rows of the cache in place. Every budget gives what
// one forward gives: cache, positions, logits and routing, shared or not.
TEST_P(SharedPrefill, ChunksUnderATokenBudgetEqualOneForward) {
  Model m = init_random(testing::tiny_config(GetParam()), 6);
  c10::InferenceMode guard;
  auto prompts = grouped_prompts();
  for (bool share : {true, false}) {
    RoutingRecorder whole_rec(12);
    Prefill whole = prefill_prompts(m, prompts, 0, 7, share, 0, &whole_rec);
    for (int64_t budget : {5, 9, 10}) {
      const std::string at = (share ? "shared, budget " : "each row, budget ") + std::to_string(budget);
      RoutingRecorder rec(12);
      Prefill p = prefill_prompts(m, prompts, 0, 7, share, budget, &rec);
      EXPECT_EQ(p.cache.length, whole.cache.length) << at;
      EXPECT_EQ(p.prompt_slots, 5) << at;
      EXPECT_TRUE(p.cache.valid.equal(whole.cache.valid)) << at;
      EXPECT_TRUE(p.cache.next_pos.equal(whole.cache.next_pos)) << at;
      EXPECT_LT(testing::max_abs_diff(p.logits_BV, whole.logits_BV), 1e-5) << at;
      const auto& a = p.cache.latent.empty() ? p.cache.k : p.cache.latent;
      const auto& b = whole.cache.latent.empty() ? whole.cache.k : whole.cache.latent;
      for (size_t l = 0; l < a.size(); ++l) EXPECT_LT(testing::max_abs_diff(a[l], b[l]), 1e-5) << at << " layer " << l;
      for (int64_t r = 0; r < 12; ++r) {
        std::vector<uint16_t> x = rec.take(r), y = RoutingRecorder(whole_rec).take(r);
        EXPECT_FALSE(x.empty()) << at << " row " << r;
        EXPECT_EQ(x, y) << at << " row " << r;
      }
    }
  }
}

TEST_P(SharedPrefill, GenerateUnderATokenBudgetEqualsOneForward) {
  Model m = init_random(testing::tiny_config(GetParam()), 7);
  GenerateConfig g;
  g.max_new_tokens = 6;
  g.sampling.greedy = true;
  g.record_routing = true;
  g.prefill_tokens = 0;
  GenerateConfig chunked = g;
  chunked.prefill_tokens = 6;
  for (int64_t rows : {0, 5}) {  // static batching, and continuous batching's refills
    g.batch_rows = chunked.batch_rows = rows;
    auto prompts = grouped_prompts();
    std::vector<Generation> x = generate(m, prompts, chunked), y = generate(m, prompts, g);
    ASSERT_EQ(x.size(), y.size());
    for (size_t r = 0; r < x.size(); ++r) {
      EXPECT_EQ(x[r].tokens, y[r].tokens) << "row " << r << ", batch_rows " << rows;
      EXPECT_EQ(x[r].routed_experts, y[r].routed_experts) << "row " << r << ", batch_rows " << rows;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, SharedPrefill, ::testing::Values("qwen3_moe", "deepseek_v3"));

TEST(SharedPrefillErrors, AnEmptyPromptIsNamed) {
  Model m = init_random(testing::tiny_qwen3(), 5);
  c10::InferenceMode guard;
  try {
    prefill_prompts(m, {{1, 2}, {}}, 0, 6, true, 0, nullptr);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("prompt 1 is empty"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moerl::model
