// Activation checkpointing (ForwardInput::checkpointing = kPerLayer) gives the loss and
// the gradient of every parameter that the plain forward gives, for each architecture,
// with padding, routing replay, and a loss that reads the router logits and gate weights.
#include <gtest/gtest.h>
#include <torch/csrc/autograd/function.h>

#include <set>

#include "model/model.h"
#include "model/test_util.h"

namespace moerl::model {
namespace {

struct Result {
  double loss = 0;
  Params grads;
};

// One forward + backward of a loss over the logits and the router outputs.
Result run(Model& m, LayerCheckpointing mode, const at::Tensor& replay) {
  for (const auto& [_, p] : m.params()) p.mutable_grad() = at::Tensor();
  at::Tensor ids = at::tensor({3, 7, 9, 11, 4, 5, 2, 8, 13, 6, 17, 1}, at::kLong).view({2, 6});
  at::Tensor mask = at::ones({2, 6}, at::kLong);
  mask[1][4] = 0;  // right padding on row 1
  mask[1][5] = 0;
  ForwardOutput o = m.forward({.input_ids = ids, .attention_mask = mask, .routing_replay = replay, .checkpointing = mode});
  at::Tensor w = at::linspace(-1.0, 1.0, o.logits_BTV.numel(), o.logits_BTV.options()).view(o.logits_BTV.sizes());
  at::Tensor loss = (o.logits_BTV * w).sum() + o.hidden_BTH.pow(2).mean();
  for (const LayerRouting& r : o.routing) {
    loss = loss + 0.1 * r.router_logits_TE.pow(2).mean() + 0.3 * r.topk_weight_TK.to(loss.scalar_type()).pow(2).sum();
  }
  loss.backward();
  Result res;
  res.loss = loss.item<double>();
  for (const auto& [name, p] : m.params()) res.grads[name] = p.grad().defined() ? p.grad().clone() : at::Tensor();
  return res;
}

void expect_same_gradients(const std::string& arch, bool with_replay) {
  io::HfConfig cfg = testing::tiny_config(arch);
  Model m = init_random(cfg, 11);
  {
    at::NoGradGuard g;
    at::manual_seed(5);
    for (const auto& [_, p] : m.params()) p.add_(at::randn_like(p) * 0.2);  // routers that discriminate
  }
  at::Tensor replay;
  if (with_replay) {
    const int64_t L = m.num_moe_layers(), K = m.arch().router_config(cfg).top_k;
    at::manual_seed(9);
    replay = at::randint(0, cfg.num_experts, {2, 6, L, K}, at::kLong);
    // Distinct ids per token (a recorded selection never repeats an expert).
    for (int64_t k = 1; k < K; ++k) replay.select(3, k).copy_((replay.select(3, 0) + k) % cfg.num_experts);
    replay.select(1, 5).fill_(-1);  // last position unrecorded: routes live
  }
  const Result plain = run(m, LayerCheckpointing::kNone, replay);
  const Result ckpt = run(m, LayerCheckpointing::kPerLayer, replay);
  EXPECT_NEAR(ckpt.loss, plain.loss, 1e-6 * std::max(1.0, std::abs(plain.loss))) << arch;
  int64_t compared = 0;
  for (const auto& [name, g] : plain.grads) {
    const at::Tensor& c = ckpt.grads.at(name);
    ASSERT_EQ(c.defined(), g.defined()) << arch << " " << name << ": gradient present with one mode only";
    if (!g.defined()) continue;
    const double scale = std::max(1.0, g.abs().max().item<double>());
    EXPECT_LE(testing::max_abs_diff(c, g), 1e-6 * scale) << arch << " " << name;
    compared += g.abs().sum().item<double>() > 0;
  }
  // Every layer's attention, norms, router and some experts were reached.
  EXPECT_GT(compared, static_cast<int64_t>(m.params().size()) / 2) << arch;
}

TEST(LayerCheckpointing, Qwen3MoeGradientsEqualThePlainForward) { expect_same_gradients("qwen3_moe", false); }
TEST(LayerCheckpointing, MixtralGradientsEqualThePlainForward) { expect_same_gradients("mixtral", false); }
TEST(LayerCheckpointing, Qwen2MoeGradientsEqualThePlainForward) { expect_same_gradients("qwen2_moe", false); }
TEST(LayerCheckpointing, DeepseekV3GradientsEqualThePlainForward) { expect_same_gradients("deepseek_v3", false); }
TEST(LayerCheckpointing, RoutingReplayGradientsEqualThePlainForward) {
  expect_same_gradients("qwen3_moe", true);
  expect_same_gradients("deepseek_v3", true);
}

// Operation nodes (not parameter leaves) of the autograd graph behind `t`: all of them, and
// the checkpoints among them.
std::pair<int64_t, int64_t> count_nodes(const at::Tensor& t) {
  std::vector<torch::autograd::Node*> stack{t.grad_fn().get()};
  std::set<torch::autograd::Node*> seen;
  int64_t checkpoints = 0;
  while (!stack.empty()) {
    torch::autograd::Node* n = stack.back();
    stack.pop_back();
    if (n == nullptr || !seen.insert(n).second) continue;
    checkpoints += n->name().find("CheckpointedLayerFn") != std::string::npos;
    for (const auto& e : n->next_edges()) stack.push_back(e.function.get());
  }
  int64_t ops = 0;
  for (torch::autograd::Node* n : seen) ops += n->name().find("AccumulateGrad") == std::string::npos;
  return {ops, checkpoints};
}

// What the checkpoint saves memory by: the forward records one node per layer, not the
// layer's graph (and its saved activations).
TEST(LayerCheckpointing, RecordsOneNodePerLayerInsteadOfItsGraph) {
  io::HfConfig cfg = testing::tiny_qwen3(/*all_moe=*/true);
  cfg.num_hidden_layers = 3;
  Model m = init_random(cfg, 3);
  at::Tensor ids = at::tensor({3, 7, 9, 11}, at::kLong).view({1, 4});
  const auto [plain, plain_ckpts] = count_nodes(m.forward({.input_ids = ids}).hidden_BTH);
  const auto [ckpt, ckpts] =
      count_nodes(m.forward({.input_ids = ids, .checkpointing = LayerCheckpointing::kPerLayer}).hidden_BTH);
  EXPECT_EQ(plain_ckpts, 0);
  EXPECT_EQ(ckpts, 3);
  EXPECT_LT(ckpt * 10, plain) << "checkpointed graph " << ckpt << " nodes, plain " << plain;
}

TEST(LayerCheckpointing, OffWithoutGradModeAndKeepsTheOutputs) {
  Model m = init_random(testing::tiny_qwen3(), 3);
  at::Tensor ids = at::tensor({3, 7, 9, 11}, at::kLong).view({1, 4});
  ForwardOutput a = m.forward({.input_ids = ids});
  ForwardOutput b = m.forward({.input_ids = ids, .checkpointing = LayerCheckpointing::kPerLayer});
  EXPECT_TRUE(at::equal(a.logits_BTV, b.logits_BTV));
  ASSERT_EQ(a.routing.size(), b.routing.size());
  EXPECT_TRUE(at::equal(a.routing[0].topk_idx_TK, b.routing[0].topk_idx_TK));
  EXPECT_TRUE(at::equal(a.routing[0].expert_load_E, b.routing[0].expert_load_E));
  EXPECT_FALSE(b.routing[0].topk_idx_TK.requires_grad());
  at::NoGradGuard no_grad;  // inference: no checkpoint, plain values
  ForwardOutput c = m.forward({.input_ids = ids, .checkpointing = LayerCheckpointing::kPerLayer});
  EXPECT_TRUE(at::equal(a.logits_BTV, c.logits_BTV));
}

}  // namespace
}  // namespace moerl::model
