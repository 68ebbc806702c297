// Sampler semantics (greedy, temperature, top-k, top-p, seeding, both logprobs), the
// character tokenizer, and generate()'s per-row stopping.
#include <gtest/gtest.h>

#include <filesystem>

#include "base/error.h"
#include "model/generate.h"
#include "model/sampler.h"
#include "model/test_util.h"
#include "model/tokenizer.h"

namespace moerl::model {
namespace {

TEST(Sampler, GreedyPicksArgmaxAndReportsModelLogprob) {
  at::Tensor logits = at::tensor({0.1f, 2.0f, -1.0f, 1.5f, 0.0f, 0.3f}).view({2, 3});
  Sampler s(SamplingConfig{.greedy = true}, 0);
  Sample x = s.sample(logits);
  EXPECT_EQ(x.tokens_B[0].item<int64_t>(), 1);
  EXPECT_EQ(x.tokens_B[1].item<int64_t>(), 0);
  EXPECT_NEAR(x.logprob_B[0].item<float>(), at::log_softmax(logits[0], 0)[1].item<float>(), 1e-6);
  EXPECT_EQ(x.sample_logprob_B[0].item<float>(), 0.f);
}

TEST(Sampler, SameSeedSameTokensAndFrequenciesFollowTemperature) {
  at::Tensor logits = at::tensor({1.0f, 0.0f, -1.0f}).repeat({4000, 1});
  SamplingConfig c{.temperature = 2.0};
  Sample a = Sampler(c, 9).sample(logits), b = Sampler(c, 9).sample(logits), d = Sampler(c, 10).sample(logits);
  EXPECT_TRUE(at::equal(a.tokens_B, b.tokens_B));
  EXPECT_FALSE(at::equal(a.tokens_B, d.tokens_B));
  at::Tensor q = at::softmax(at::tensor({1.0, 0.0, -1.0}, at::kDouble) / 2.0, 0);
  at::Tensor freq = at::bincount(a.tokens_B, {}, 3).to(at::kDouble) / 4000.0;
  EXPECT_LE(testing::max_abs_diff(freq, q), 0.03);
  // sample_logprob is log q (tempered), logprob the untempered model logprob.
  const int64_t t0 = a.tokens_B[0].item<int64_t>();
  EXPECT_NEAR(a.sample_logprob_B[0].item<float>(), std::log(q[t0].item<double>()), 1e-5);
  EXPECT_NEAR(a.logprob_B[0].item<float>(), at::log_softmax(logits[0], 0)[t0].item<float>(), 1e-6);
}

TEST(Sampler, TopKAndTopPTruncate) {
  at::Tensor logits = at::log(at::tensor({0.5f, 0.3f, 0.15f, 0.05f})).repeat({2000, 1});
  Sample k = Sampler(SamplingConfig{.top_k = 2}, 1).sample(logits);
  EXPECT_LE(k.tokens_B.max().item<int64_t>(), 1);
  EXPECT_NEAR(k.sample_logprob_B.masked_select(k.tokens_B.eq(0))[0].item<float>(), std::log(0.5 / 0.8), 1e-5);
  // top_p 0.7: {0.5, 0.3} reach it; 0.15 and 0.05 are dropped.
  Sample p = Sampler(SamplingConfig{.top_p = 0.7}, 1).sample(logits);
  EXPECT_LE(p.tokens_B.max().item<int64_t>(), 1);
  EXPECT_GT(p.tokens_B.eq(1).sum().item<int64_t>(), 400);
  // top_p 0.5 keeps only the first token (it alone reaches 0.5).
  Sample p1 = Sampler(SamplingConfig{.top_p = 0.5}, 1).sample(logits);
  EXPECT_EQ(p1.tokens_B.max().item<int64_t>(), 0);
}

TEST(Sampler, RejectsBadSettings) {
  EXPECT_THROW(Sampler(SamplingConfig{.temperature = 0.0}, 0), Error);
  EXPECT_THROW(Sampler(SamplingConfig{.top_p = 1.5}, 0), Error);
  EXPECT_THROW(Sampler(SamplingConfig{.top_k = -1}, 0), Error);
}

TEST(Tokenizer, CharRoundTripAndFile) {
  CharTokenizer t;
  EXPECT_EQ(t.vocab_size(), 98);
  std::vector<int64_t> ids = t.encode("Hi 1+2=3~", true);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 3 + ('H' - 32));
  EXPECT_EQ(t.decode(ids), "Hi 1+2=3~");
  ids.push_back(t.eos_id());
  EXPECT_EQ(t.decode(ids), "Hi 1+2=3~");
  EXPECT_THROW(t.encode("tab\there", false), Error);
  EXPECT_THROW(t.decode({98}), Error);
  const std::string dir = ::testing::TempDir() + "/tok";
  t.save(dir);
  auto back = load_tokenizer(dir);
  EXPECT_EQ(back->encode("xyz", false), t.encode("xyz", false));
  EXPECT_THROW(CharTokenizer::parse("{\"format\":\"moerl.char_tokenizer\",\"version\":2}", "x.json"), Error);
  EXPECT_THROW(load_tokenizer(::testing::TempDir() + "/no_such_dir"), Error);
}

TEST(Generate, StopsRowsAtEosAndIsReproducible) {
  Model m = init_random(testing::tiny_qwen3(), 5);
  {
    at::NoGradGuard g;
    at::manual_seed(5);
    for (const auto& [name, p] : m.params()) {
      if (p.dim() >= 2) p.normal_(0.0, 1.0 / std::sqrt(static_cast<double>(p.size(-1))));
    }
  }
  GenerateConfig g;
  g.max_new_tokens = 12;
  g.seed = 3;
  std::vector<std::vector<int64_t>> prompts = {{1, 5, 6, 7}, {1, 9}, {1, 20, 21}};
  auto a = generate(m, prompts, g), b = generate(m, prompts, g);
  for (size_t r = 0; r < prompts.size(); ++r) {
    EXPECT_EQ(a[r].tokens, b[r].tokens);
    EXPECT_EQ(a[r].tokens.size(), 12u);
    EXPECT_EQ(a[r].logprobs.size(), 12u);
    for (float lp : a[r].logprobs) EXPECT_LE(lp, 0.f);
    for (size_t i = 0; i < a[r].logprobs.size(); ++i) EXPECT_NEAR(a[r].logprobs[i], a[r].sample_logprobs[i], 1e-5);
  }
  // Make row 0's third sampled token an EOS: it stops there, the others run to length.
  g.eos_ids = {a[0].tokens[2]};
  auto c = generate(m, prompts, g);
  EXPECT_EQ(c[0].finish, FinishReason::kEos);
  EXPECT_LE(c[0].tokens.size(), 3u);
  EXPECT_EQ(c[0].tokens.back(), a[0].tokens[2]);
  // Ragged prompts give the same tokens as running each prompt alone (left padding is exact).
  GenerateConfig greedy;
  greedy.max_new_tokens = 6;
  greedy.sampling.greedy = true;
  auto batched = generate(m, prompts, greedy);
  for (size_t r = 0; r < prompts.size(); ++r) {
    EXPECT_EQ(generate(m, {prompts[r]}, greedy)[0].tokens, batched[r].tokens) << "row " << r;
  }
}

}  // namespace
}  // namespace moerl::model

namespace moerl::model {
namespace {

// GenerateConfig::cancel stops a generation between decode steps (a drain's deadline): the
// call throws GenerationCancelled after exactly the steps it allowed; without it the same
// call runs to max_new_tokens.
TEST(GenerateCancel, StopsBetweenDecodeStepsWhenAsked) {
  Model m = init_random(testing::tiny_qwen3(true), 31);
  GenerateConfig gc{.max_new_tokens = 40, .seed = 5};
  int asked = 0;
  gc.cancel = [&] { return ++asked > 3; };
  try {
    generate(m, {{1, 7, 9}, {1, 4}}, gc);
    ADD_FAILURE() << "a cancelled generation returned";
  } catch (const GenerationCancelled& c) {
    EXPECT_EQ(c.steps(), 3);
    EXPECT_EQ(asked, 4);
  }
  gc.cancel = [] { return false; };
  std::vector<Generation> out = generate(m, {{1, 7, 9}}, gc);
  EXPECT_EQ(out[0].tokens.size(), 40u);  // no eos_ids: only the length stops it
}

}  // namespace
}  // namespace moerl::model
