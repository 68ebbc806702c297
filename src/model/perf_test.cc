// Generation throughput of the tiny RL-demo-sized model on CPU (one thread under ctest):
// 2 layers, hidden 64, 8 experts top-2, vocab 98, batch 64. Prints tokens/s (docs/model.md
// records the figure); asserts only a floor far below it, to catch pathologies.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "model/generate.h"
#include "model/test_util.h"

namespace moerl::model {
namespace {

TEST(Perf, TinyModelGenerationTokensPerSecond) {
  io::HfConfig c = testing::tiny_qwen3(/*all_moe=*/true);
  c.vocab_size = 98;
  c.hidden_size = 64;
  c.head_dim = 16;
  c.moe_intermediate_size = 64;
  Model m = init_random(c, 1);
  std::vector<std::vector<int64_t>> prompts(64);
  for (int64_t b = 0; b < 64; ++b) {
    for (int64_t t = 0; t < 8 + b % 8; ++t) prompts[b].push_back(3 + (b * 7 + t) % 90);
  }
  GenerateConfig g;
  g.max_new_tokens = 48;
  g.seed = 1;
  generate(m, prompts, g);  // warm-up
  const auto t0 = std::chrono::steady_clock::now();
  auto out = generate(m, prompts, g);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int64_t n = 0;
  for (const auto& o : out) n += static_cast<int64_t>(o.tokens.size());
  std::printf("[perf] generate: batch 64, %lld new tokens in %.3f s = %.0f tokens/s (%d threads)\n",
              static_cast<long long>(n), s, n / s, at::get_num_threads());
  EXPECT_EQ(n, 64 * 48);
  EXPECT_GT(n / s, 500.0);
}

}  // namespace
}  // namespace moerl::model
