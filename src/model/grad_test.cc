// Finite-difference gradient check of the whole model in double precision: autograd
// gradients of a scalar loss wrt router, expert, attention, norm and embedding weights
// against central differences, on one rank (the EP autograd ops: ep/moe_equivalence_test.cc).
#include <gtest/gtest.h>

#include "model/common/moe.h"
#include "model/model.h"
#include "model/test_util.h"

namespace moerl::model {
namespace {

using Probes = std::vector<std::pair<std::string, int64_t>>;

// Autograd vs central differences for entries `probes` of a double model of `cfg`.
void check_gradients(io::HfConfig cfg, const Probes& probes, int min_checked) {
  ModelOptions opts;
  opts.dtype = at::kDouble;
  Model m = init_random(cfg, 3, opts);
  {
    at::NoGradGuard g;
    at::manual_seed(3);
    for (const auto& [name, p] : m.params()) p.normal_(p.dim() == 1 ? 1.0 : 0.0, 0.4);
    for (const auto& [name, b] : m.buffers()) b.normal_(0.0, 0.1);
  }
  at::manual_seed(4);
  at::Tensor ids = at::randint(0, cfg.vocab_size, {2, 5}, at::kLong);
  at::Tensor mask = at::ones({2, 5}, at::kLong);
  mask[1][0] = 0;  // a left pad
  at::Tensor proj = at::randn({2, 5, cfg.vocab_size}, at::kDouble);
  auto loss_of = [&]() {
    ForwardOutput o = m.forward({ids, mask});
    // Log-softmax (the RL losses' shape) and the router logits (an aux-loss-like term).
    at::Tensor l = (o.logits_BTV.log_softmax(-1) * proj).sum();
    return l + 0.1 * o.routing[0].router_logits_TE.pow(2).mean();
  };
  auto routing_of = [&]() {
    std::vector<at::Tensor> ids_per_layer;
    for (const auto& r : m.forward({ids, mask}).routing) ids_per_layer.push_back(r.topk_idx_TK);
    return at::cat(ids_per_layer, 1);
  };

  at::Tensor loss = loss_of();
  loss.backward();
  at::Tensor base_routing = routing_of();
  at::NoGradGuard no_grad;
  int checked = 0;
  for (const auto& [name, flat] : probes) {
    ASSERT_TRUE(m.params().count(name)) << name;
    at::Tensor p = m.params().at(name);
    ASSERT_TRUE(p.grad().defined()) << name;
    const double analytic = p.grad().reshape({-1})[flat].item<double>();
    const double h = 1e-5;
    at::Tensor entry = p.view({-1}).narrow(0, flat, 1);
    const double orig = entry.item<double>();
    entry.fill_(orig + h);
    const double up = loss_of().item<double>();
    const bool same_up = at::equal(routing_of(), base_routing);
    entry.fill_(orig - h);
    const double down = loss_of().item<double>();
    const bool same_down = at::equal(routing_of(), base_routing);
    entry.fill_(orig);
    if (!same_up || !same_down) continue;  // top-k flipped: not differentiable here
    const double numeric = (up - down) / (2 * h);
    EXPECT_NEAR(analytic, numeric, 1e-6 + 1e-5 * std::abs(numeric)) << name << "[" << flat << "]";
    EXPECT_GT(std::abs(numeric), 1e-8) << name << " has no gradient signal; pick another entry";
    ++checked;
  }
  EXPECT_GE(checked, min_checked);
}

io::HfConfig shrink(io::HfConfig cfg) {
  cfg.vocab_size = 20;
  cfg.hidden_size = 16;
  cfg.moe_intermediate_size = 8;
  cfg.intermediate_size = 12;
  return cfg;
}

TEST(Gradients, WholeModelMatchesCentralDifferencesInDouble) {
  io::HfConfig cfg = shrink(testing::tiny_qwen3());
  cfg.head_dim = 4;
  cfg.num_experts = 4;
  check_gradients(cfg,
                  {
                      {"model.layers.0.mlp.gate.weight", 5},
                      {"model.layers.0.mlp.gate.weight", 37},
                      {"model.layers.0.mlp.experts.1.gate_proj.weight", 10},
                      {"model.layers.0.mlp.experts.2.down_proj.weight", 3},
                      {"model.layers.0.mlp.experts.3.up_proj.weight", 17},
                      {"model.layers.0.self_attn.q_proj.weight", 21},
                      {"model.layers.0.self_attn.k_norm.weight", 2},
                      {"model.layers.1.mlp.down_proj.weight", 7},
                      {"model.layers.1.self_attn.v_proj.weight", 9},
                      {"model.embed_tokens.weight", 40},
                      {"lm_head.weight", 33},
                      {"model.norm.weight", 1},
                  },
                  11);
}

// MLA (both q forms), YaRN, the biased sigmoid group router with scaling, shared experts.
TEST(Gradients, DeepseekV3MatchesCentralDifferencesInDouble) {
  for (bool q_lora : {true, false}) {
    SCOPED_TRACE(q_lora ? "q_lora" : "q_proj");
    io::HfConfig cfg = shrink(testing::tiny_deepseek(q_lora));
    Probes probes = {
        {"model.layers.1.mlp.gate.weight", 5},
        {"model.layers.1.mlp.gate.weight", 70},
        {"model.layers.1.mlp.shared_experts.up_proj.weight", 11},
        {"model.layers.1.mlp.shared_experts.down_proj.weight", 6},
        {"model.layers.0.mlp.gate_proj.weight", 4},
        {"model.layers.0.self_attn.kv_a_proj_with_mqa.weight", 9},
        {"model.layers.0.self_attn.kv_a_proj_with_mqa.weight", 13 * 16 + 2},  // a rope row
        {"model.layers.1.self_attn.kv_a_layernorm.weight", 3},
        {"model.layers.1.self_attn.kv_b_proj.weight", 31},
        {"model.layers.0.self_attn.o_proj.weight", 12},
        {"model.embed_tokens.weight", 40},
    };
    if (q_lora) {
      probes.push_back({"model.layers.0.self_attn.q_a_proj.weight", 8});
      probes.push_back({"model.layers.0.self_attn.q_a_layernorm.weight", 2});
      probes.push_back({"model.layers.1.self_attn.q_b_proj.weight", 10 * 16 + 5});  // a rope column of head 0
    } else {
      probes.push_back({"model.layers.1.self_attn.q_proj.weight", 10 * 16 + 5});
    }
    check_gradients(cfg, probes, static_cast<int>(probes.size()) - 2);
  }
}

// Qwen2-MoE's gated shared expert and q/k/v biases.
TEST(Gradients, Qwen2MoeMatchesCentralDifferencesInDouble) {
  io::HfConfig cfg = shrink(testing::tiny_qwen2());
  cfg.head_dim = 4;
  cfg.num_experts = 4;
  cfg.shared_expert_intermediate_size = 6;
  check_gradients(cfg,
                  {
                      {"model.layers.0.mlp.shared_expert_gate.weight", 3},
                      {"model.layers.0.mlp.shared_expert.gate_proj.weight", 20},
                      {"model.layers.0.mlp.gate.weight", 9},
                      {"model.layers.0.self_attn.q_proj.bias", 5},
                      {"model.layers.0.self_attn.v_proj.bias", 2},
                      {"model.layers.1.self_attn.k_proj.bias", 1},
                  },
                  5);
}

// The router's combine weights get gradients through the experts' weighted sum (not only
// through logits).
TEST(Gradients, RouterWeightsReceiveGradientThroughTheCombineWeights) {
  auto group = ep::loopback_group(4);
  at::manual_seed(1);
  at::Tensor x = at::randn({6, 8}).set_requires_grad(true);
  at::Tensor router = at::randn({4, 8}).set_requires_grad(true);
  MoeWeights w;
  w.router_EH = router;
  for (int e = 0; e < 4; ++e) {
    w.experts.push_back({at::randn({5, 8}), at::randn({5, 8}), at::randn({8, 5})});
  }
  MoeOutput o = moe_forward(w, x, {4, 2, true}, *group);
  o.y_TH.sum().backward();
  ASSERT_TRUE(router.grad().defined());
  EXPECT_GT(router.grad().abs().sum().item<double>(), 0.0);
  EXPECT_GT(x.grad().abs().sum().item<double>(), 0.0);
}

}  // namespace
}  // namespace moerl::model
