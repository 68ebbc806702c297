// Model behaviour beyond parity: KV-cache decode equals full recompute, left padding equals
// no padding, save -> load gives identical logits, router statistics, random init, bad input.
#include <gtest/gtest.h>

#include <c10/core/InferenceMode.h>

#include <filesystem>

#include "base/error.h"
#include "base/files.h"
#include "io/tensor_io.h"
#include "model/model.h"
#include "model/test_util.h"

namespace moerl::model {
namespace {

using testing::max_abs_diff;

// Bigger-than-default weights so logits vary (0.02 init makes everything near-uniform).
Model random_model(const io::HfConfig& cfg, uint64_t seed) {
  Model m = init_random(cfg, seed);
  at::NoGradGuard g;
  at::manual_seed(seed);
  for (const auto& [name, p] : m.params()) {
    if (p.dim() >= 2) p.normal_(0.0, 1.0 / std::sqrt(static_cast<double>(p.size(-1))));
  }
  for (const auto& [name, b] : m.buffers()) b.normal_(0.0, 0.1);  // a selection bias that matters
  return m;
}

class ModelByArch : public ::testing::TestWithParam<std::string> {
 protected:
  io::HfConfig cfg() const { return testing::tiny_config(GetParam()); }
};

TEST_P(ModelByArch, KvCacheDecodeEqualsFullRecompute) {
  Model m = random_model(cfg(), 3);
  c10::InferenceMode guard;
  const int64_t B = 3, Tp = 6, N = 5;
  at::manual_seed(11);
  at::Tensor ids = at::randint(3, cfg().vocab_size, {B, Tp + N}, at::kLong);
  // Ragged prompts, left padded: row b has b pads.
  at::Tensor mask = at::ones({B, Tp + N}, at::kLong);
  for (int64_t b = 0; b < B; ++b) mask[b].narrow(0, 0, b).fill_(0);
  at::Tensor full = m.forward({ids, mask}).logits_BTV;

  KvCache cache = m.make_cache(B, Tp + N);
  at::Tensor pre = m.forward({ids.narrow(1, 0, Tp), mask.narrow(1, 0, Tp), {}, &cache}).logits_BTV;
  double worst = max_abs_diff(pre.narrow(1, Tp - 1, 1), full.narrow(1, Tp - 1, 1));
  for (int64_t t = Tp; t < Tp + N; ++t) {
    at::Tensor step = m.forward({ids.narrow(1, t, 1), mask.narrow(1, t, 1), {}, &cache}).logits_BTV;
    worst = std::max(worst, max_abs_diff(step, full.narrow(1, t, 1)));
  }
  EXPECT_LE(worst, 1e-5);
  EXPECT_EQ(cache.length, Tp + N);
  EXPECT_EQ(cache.next_pos[2].item<int64_t>(), Tp + N - 2);
}

TEST_P(ModelByArch, LeftPaddingDoesNotChangeLogits) {
  Model m = random_model(cfg(), 4);
  c10::InferenceMode guard;
  at::manual_seed(5);
  at::Tensor ids = at::randint(3, cfg().vocab_size, {1, 7}, at::kLong);
  at::Tensor alone = m.forward({ids}).logits_BTV;
  at::Tensor padded_ids = at::cat({at::zeros({1, 3}, at::kLong), ids}, 1);
  at::Tensor mask = at::cat({at::zeros({1, 3}, at::kLong), at::ones({1, 7}, at::kLong)}, 1);
  at::Tensor padded = m.forward({padded_ids, mask}).logits_BTV.narrow(1, 3, 7);
  EXPECT_LE(max_abs_diff(alone, padded), 1e-5);
  EXPECT_TRUE(padded.isfinite().all().item<bool>());
}

TEST_P(ModelByArch, LastLogitsOnlyIsTheFullForwardsLastPosition) {
  Model m = random_model(cfg(), 8);
  c10::InferenceMode guard;
  at::manual_seed(9);
  const int64_t B = 2, T = 6;
  at::Tensor ids = at::randint(3, cfg().vocab_size, {B, T}, at::kLong);
  at::Tensor mask = at::ones({B, T}, at::kLong);
  mask[1].narrow(0, 0, 2).fill_(0);  // row 1 left padded
  at::Tensor full = m.forward({ids, mask}).logits_BTV;
  KvCache cache = m.make_cache(B, T);
  ForwardOutput last = m.forward({ids, mask, {}, &cache, {}, /*last_logits_only=*/true});
  ASSERT_EQ(last.logits_BTV.sizes(), (at::IntArrayRef{B, 1, cfg().vocab_size}));
  EXPECT_LE(max_abs_diff(last.logits_BTV, full.narrow(1, T - 1, 1)), 1e-6);
  EXPECT_EQ(last.hidden_BTH.size(1), T);  // value heads still see every position
  EXPECT_EQ(cache.length, T);
}

TEST_P(ModelByArch, SaveLoadGivesIdenticalLogits) {
  Model m = random_model(cfg(), 6);
  const std::string dir = ::testing::TempDir() + "/save_" + GetParam();
  remove_tree(dir);
  m.save(dir);
  Model back = load_model(dir);
  EXPECT_EQ(back.num_parameters(), m.num_parameters());
  c10::InferenceMode guard;
  at::Tensor ids = at::randint(3, cfg().vocab_size, {2, 9}, at::kLong);
  EXPECT_EQ(max_abs_diff(m.forward({ids}).logits_BTV, back.forward({ids}).logits_BTV), 0.0);
  // The saved file holds per-expert hub names, never fused tensors, and the buffers (float32).
  auto saved = io::load_tensors(dir);
  for (const auto& [name, _] : saved) EXPECT_EQ(name.find("gate_up_proj"), std::string::npos) << name;
  EXPECT_EQ(saved.size(), m.state().size());
  for (const auto& [name, b] : m.buffers()) {
    ASSERT_TRUE(saved.count(name)) << name;
    EXPECT_EQ(saved.at(name).scalar_type(), at::kFloat) << name;
    EXPECT_TRUE(at::equal(back.buffers().at(name), b)) << name;
    EXPECT_FALSE(back.params().count(name)) << name << " must not be trained";
  }
}

TEST_P(ModelByArch, RouterStatisticsDescribeTheRouting) {
  Model m = random_model(cfg(), 7);
  at::Tensor ids = at::randint(3, cfg().vocab_size, {2, 5}, at::kLong);
  ForwardOutput o = m.forward({ids});
  const int64_t moe_layers = GetParam() == "mixtral" ? 2 : 1;  // deepseek: layer 0 is dense
  ASSERT_EQ(static_cast<int64_t>(o.routing.size()), moe_layers);
  const auto& r = o.routing[0];
  EXPECT_EQ(r.router_logits_TE.sizes(), at::IntArrayRef({10, cfg().num_experts}));
  EXPECT_EQ(r.topk_idx_TK.sizes(), at::IntArrayRef({10, 2}));
  EXPECT_EQ(r.expert_load_E.sum().item<int64_t>(), 20);
  at::Tensor counted = at::bincount(r.topk_idx_TK.reshape({-1}), {}, cfg().num_experts);
  EXPECT_TRUE(at::equal(counted, r.expert_load_E.to(at::kLong)));
  if (GetParam().rfind("deepseek", 0) != 0) {
    // top-k ids are the largest router logits (DeepSeek's biased group routing: router_test).
    at::Tensor best = std::get<1>(r.router_logits_TE.topk(2, -1));
    EXPECT_TRUE(at::equal(best, r.topk_idx_TK));
  }
  EXPECT_EQ(o.hidden_BTH.sizes(), at::IntArrayRef({2, 5, cfg().hidden_size}));
  EXPECT_TRUE(r.router_logits_TE.requires_grad());
}

INSTANTIATE_TEST_SUITE_P(Archs, ModelByArch,
                         ::testing::Values("qwen3_moe", "mixtral", "qwen2_moe", "deepseek_v3", "deepseek_v3_noqlora"));

// deepseek_v3's e_score_correction_bias is a buffer: outside params() (so outside the
// optimizer and gradient sync), float32 in a bf16 model, no gradient, yet it steers routing.
TEST(Model, SelectionBiasIsABufferThatSteersRouting) {
  Model m = random_model(testing::tiny_deepseek(), 9);
  const std::string name = "model.layers.1.mlp.gate.e_score_correction_bias";
  ASSERT_TRUE(m.buffers().count(name));
  EXPECT_FALSE(m.params().count(name));
  EXPECT_TRUE(m.state().count(name));
  EXPECT_FALSE(m.buffers().at(name).requires_grad());
  for (const at::Tensor& p : m.parameters()) EXPECT_FALSE(p.is_same(m.buffers().at(name)));
  at::Tensor ids = at::randint(3, 50, {2, 8}, at::kLong);
  ForwardOutput o = m.forward({ids});
  o.logits_BTV.sum().backward();
  EXPECT_FALSE(m.buffers().at(name).grad().defined());
  EXPECT_TRUE(m.params().at("model.layers.1.mlp.gate.weight").grad().defined());
  // A large bias on expert 5 makes every token choose it; the weights stay bias-free.
  {
    at::NoGradGuard g;
    m.buffers().at(name).zero_()[5] = 10.0;
  }
  ForwardOutput biased = m.forward({ids});
  EXPECT_TRUE(biased.routing[0].topk_idx_TK.eq(5).any(1).all().item<bool>());
  EXPECT_LE(biased.routing[0].topk_weight_TK.max().item<double>(), 2.5 + 1e-6);  // normalised x 2.5
  EXPECT_EQ(biased.routing[0].router_logits_TE.scalar_type(), at::kFloat);

  ModelOptions bf;
  bf.dtype = at::kBFloat16;
  Model b = init_random(testing::tiny_deepseek(), 9, bf);
  b.load_weights(m.state());
  EXPECT_EQ(b.buffers().at(name).scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(b.buffers().at(name), m.buffers().at(name)));
  EXPECT_EQ(b.params().at("model.layers.1.mlp.gate.weight").scalar_type(), at::kBFloat16);
  at::NoGradGuard g;
  EXPECT_EQ(b.forward({ids}).routing[0].router_logits_TE.scalar_type(), at::kFloat);  // routed in float32
}

TEST(Model, InitRandomIsSeededAndFollowsTheRecipe) {
  Model a = init_random(testing::tiny_qwen3(), 1), b = init_random(testing::tiny_qwen3(), 1);
  Model c = init_random(testing::tiny_qwen3(), 2);
  const at::Tensor& wa = a.params().at("model.layers.0.mlp.experts.3.up_proj.weight");
  EXPECT_TRUE(at::equal(wa, b.params().at("model.layers.0.mlp.experts.3.up_proj.weight")));
  EXPECT_FALSE(at::equal(wa, c.params().at("model.layers.0.mlp.experts.3.up_proj.weight")));
  EXPECT_NEAR(a.params().at("model.embed_tokens.weight").std().item<double>(), 0.02, 0.002);
  EXPECT_TRUE(at::equal(a.params().at("model.norm.weight"), at::ones({32})));
  EXPECT_TRUE(wa.requires_grad());
  EXPECT_TRUE(a.params().count("lm_head.weight"));  // untied config
  io::HfConfig tied = testing::tiny_qwen3();
  tied.tie_word_embeddings = true;
  EXPECT_FALSE(init_random(tied, 1).params().count("lm_head.weight"));
}

TEST(Model, Bfloat16ForwardTracksFloat32) {
  Model f = random_model(testing::tiny_qwen3(), 8);
  ModelOptions o;
  o.dtype = at::kBFloat16;
  Model b = init_random(testing::tiny_qwen3(), 8, o);
  b.load_weights(f.params());
  EXPECT_EQ(b.params().at("model.norm.weight").scalar_type(), at::kBFloat16);
  c10::InferenceMode guard;
  at::manual_seed(8);
  at::Tensor ids = at::randint(3, 50, {2, 6}, at::kLong);
  at::Tensor mask = at::ones({2, 6}, at::kLong);
  mask[1][0] = 0;
  at::Tensor lf = f.forward({ids, mask}).logits_BTV, lb = b.forward({ids, mask}).logits_BTV;
  EXPECT_EQ(lb.scalar_type(), at::kFloat);
  EXPECT_TRUE(lb.isfinite().all().item<bool>());
  // bf16 keeps ~3 significant digits; logits here are O(1).
  EXPECT_LE(testing::max_abs_diff(lb, lf), 0.25 * lf.abs().max().item<double>());
  EXPECT_GT(at::cosine_similarity(lb.reshape({-1}), lf.reshape({-1}), 0).item<double>(), 0.99);
}

TEST(Model, LoadWeightsCopiesInPlace) {
  Model a = random_model(testing::tiny_qwen3(), 1), b = random_model(testing::tiny_qwen3(), 2);
  at::Tensor ids = at::randint(3, 50, {1, 4}, at::kLong);
  at::Tensor before = a.params().at("model.norm.weight");
  a.load_weights(b.params());
  EXPECT_TRUE(before.is_same(a.params().at("model.norm.weight")));
  c10::InferenceMode guard;
  EXPECT_EQ(max_abs_diff(a.forward({ids}).logits_BTV, b.forward({ids}).logits_BTV), 0.0);
}

TEST(Model, RejectsBadInputs) {
  Model m = random_model(testing::tiny_qwen3(), 1);
  EXPECT_THROW(m.forward({at::full({1, 3}, 50, at::kLong)}), Error);               // id >= vocab
  EXPECT_THROW(m.forward({at::zeros({1, 3}, at::kInt)}), Error);                   // wrong dtype
  EXPECT_THROW(m.forward({at::zeros({3}, at::kLong)}), Error);                     // wrong rank
  EXPECT_THROW(m.forward({at::zeros({1, 3}, at::kLong), at::ones({1, 2})}), Error); // mask shape
  KvCache small = m.make_cache(1, 2);
  EXPECT_THROW(m.forward({at::zeros({1, 3}, at::kLong), {}, {}, &small}), Error);   // overflow
  io::HfConfig bad = testing::tiny_qwen3();
  bad.model_type = "llama4";
  EXPECT_THROW(init_random(bad, 0), Error);
}

}  // namespace
}  // namespace moerl::model
