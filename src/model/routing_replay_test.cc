// Routing replay (R3): generate() records the experts every fed token used; a forward with
// that record as routing_replay selects exactly those experts; when the replaying model's
// router would choose differently (a near-tie flipped by a tiny perturbation), its logprobs
// still match the recording model's; gradients reach the router through the gathered logits.
#include <gtest/gtest.h>

#include "base/error.h"
#include "model/generate.h"
#include "model/model.h"
#include "model/test_util.h"

namespace moerl::model {
namespace {

at::Tensor replay_of(const Generation& gen, int64_t prompt_len, const Model& m) {
  const int64_t L = m.num_moe_layers(), K = m.config().num_experts_per_tok;
  const int64_t T = prompt_len + static_cast<int64_t>(gen.tokens.size());
  at::Tensor r = at::full({1, T, L, K}, -1, at::kLong);
  const int64_t fed = static_cast<int64_t>(gen.routed_experts.size()) / (L * K);
  EXPECT_EQ(fed, T - 1) << "the prompt and every generated token but the last are recorded";
  for (int64_t i = 0; i < fed * L * K; ++i) r.view({-1})[i] = static_cast<int64_t>(gen.routed_experts[i]);
  return r;
}

at::Tensor sequence(const std::vector<int64_t>& prompt, const Generation& gen) {
  std::vector<int64_t> ids = prompt;
  ids.insert(ids.end(), gen.tokens.begin(), gen.tokens.end());
  return at::tensor(ids).reshape({1, -1});
}

// Logprob of each generated token under `m` (temperature 1).
std::vector<double> scored(Model& m, const at::Tensor& ids, int64_t prompt_len, const at::Tensor& replay) {
  at::Tensor lp = m.forward({.input_ids = ids, .routing_replay = replay}).logits_BTV[0].log_softmax(-1);
  std::vector<double> out;
  for (int64_t t = prompt_len; t < ids.size(1); ++t) out.push_back(lp[t - 1][ids[0][t]].item<double>());
  return out;
}

TEST(RoutingReplay, ReplayedSelectionEqualsTheRecordedOneExactly) {
  Model m = init_random(testing::tiny_qwen3(true), 21);
  const std::vector<int64_t> prompt = {1, 7, 9, 11, 4};
  GenerateConfig gc{.max_new_tokens = 6, .seed = 3, .record_routing = true};
  Generation gen = generate(m, {prompt}, gc)[0];
  at::Tensor ids = sequence(prompt, gen), replay = replay_of(gen, 5, m);
  ForwardOutput o = m.forward({.input_ids = ids, .routing_replay = replay});
  ASSERT_EQ(static_cast<int64_t>(o.routing.size()), m.num_moe_layers());
  const int64_t T = ids.size(1);
  for (size_t l = 0; l < o.routing.size(); ++l) {
    at::Tensor want = replay[0].select(1, static_cast<int64_t>(l)).slice(0, 0, T - 1);
    EXPECT_TRUE(at::equal(o.routing[l].topk_idx_TK.slice(0, 0, T - 1), want)) << "layer " << l;
  }
}

TEST(RoutingReplay, TrainerLogprobsMatchTheRolloutsWhenItsRouterWouldChooseOtherExperts) {
  Model rollout = init_random(testing::tie_config(), 22);
  Model trainer = init_random(testing::tie_config(), 22);
  testing::make_router_ties(rollout, +1e-6, 5);  // same draw: the two differ only in the sign of delta
  testing::make_router_ties(trainer, -1e-6, 5);
  const std::vector<int64_t> prompt = {1, 13, 8, 30, 22, 5};
  GenerateConfig gc{.max_new_tokens = 8, .seed = 9, .record_routing = true};
  Generation gen = generate(rollout, {prompt}, gc)[0];
  at::Tensor ids = sequence(prompt, gen), replay = replay_of(gen, 6, rollout);

  // Without replay the trainer routes the tied tokens to the other expert.
  ForwardOutput live = trainer.forward({.input_ids = ids});
  const int64_t fed = ids.size(1) - 1;
  at::Tensor recorded = replay[0].select(1, 0).slice(0, 0, fed).reshape({-1});
  const int64_t flips = live.routing[0].topk_idx_TK.slice(0, 0, fed).reshape({-1}).ne(recorded).sum().item<int64_t>();
  ASSERT_GT(flips, 0) << "the perturbation flipped no routing decision; the test proves nothing";

  const std::vector<double> behaviour(gen.logprobs.begin(), gen.logprobs.end());
  std::vector<double> without = scored(trainer, ids, 6, {}), with = scored(trainer, ids, 6, replay);
  double worst_without = 0, worst_with = 0;
  for (size_t k = 0; k < behaviour.size(); ++k) {
    worst_without = std::max(worst_without, std::abs(without[k] - behaviour[k]));
    worst_with = std::max(worst_with, std::abs(with[k] - behaviour[k]));
  }
  EXPECT_GT(worst_without, 1e-3) << flips << " flips should move some logprob";
  EXPECT_LT(worst_with, 1e-5);
}

TEST(RoutingReplay, GradientsReachTheRouterThroughTheGatheredLogits) {
  io::HfConfig c = testing::tiny_qwen3(true);
  c.num_experts_per_tok = 2;
  Model m = init_random(c, 23);
  const std::vector<int64_t> prompt = {1, 3, 5, 7};
  GenerateConfig gc{.max_new_tokens = 4, .seed = 1, .record_routing = true};
  Generation gen = generate(m, {prompt}, gc)[0];
  at::Tensor ids = sequence(prompt, gen), replay = replay_of(gen, 4, m);
  at::Tensor loss = m.forward({.input_ids = ids, .routing_replay = replay}).logits_BTV.log_softmax(-1).select(-1, 3).sum();
  loss.backward();
  const at::Tensor& router = m.params().at("model.layers.0.mlp.gate.weight");
  ASSERT_TRUE(router.grad().defined());
  EXPECT_GT(router.grad().abs().sum().item<double>(), 0);
  EXPECT_TRUE(router.grad().isfinite().all().item<bool>());
}

TEST(RoutingReplay, BadShapesAndIdsAreClearErrors) {
  Model m = init_random(testing::tiny_qwen3(true), 24);
  at::Tensor ids = at::tensor(std::vector<int64_t>{1, 2, 3}).reshape({1, 3});
  EXPECT_THROW(m.forward({.input_ids = ids, .routing_replay = at::zeros({1, 3, 1, 2}, at::kLong)}), Error);
}

}  // namespace
}  // namespace moerl::model
