// MoE block against a naive per-token reference, router semantics, skipped -1 slots.
#include <gtest/gtest.h>

#include <tuple>

#include "ep/autograd.h"
#include "model/common/layers.h"
#include "model/common/moe.h"
#include "model/common/router.h"
#include "model/test_util.h"

namespace moerl::model {
namespace {

std::vector<ExpertWeights> random_experts(int64_t E, int64_t H, int64_t I) {
  std::vector<ExpertWeights> ex;
  for (int64_t e = 0; e < E; ++e) ex.push_back({at::randn({I, H}), at::randn({I, H}), at::randn({H, I})});
  return ex;
}

TEST(Moe, MatchesNaivePerTokenReference) {
  at::manual_seed(2);
  const int64_t T = 9, H = 12, E = 6, I = 7, K = 2;
  for (bool norm : {true, false}) {
    MoeWeights w{at::randn({E, H}), random_experts(E, H, I)};
    at::Tensor x = at::randn({T, H});
    auto group = ep::loopback_group(E);
    MoeOutput o = moe_forward(w, x, {E, K, norm}, *group);
    at::Tensor probs = at::softmax(at::linear(x, w.router_EH), -1);
    for (int64_t t = 0; t < T; ++t) {
      auto [vals, idx] = probs[t].topk(K);
      if (norm) vals = vals / vals.sum();
      at::Tensor want = at::zeros({H});
      for (int64_t k = 0; k < K; ++k) {
        const ExpertWeights& ew = w.experts[idx[k].item<int64_t>()];
        want += vals[k] * swiglu(x[t], ew.gate_IH, ew.up_IH, ew.down_HI);
      }
      EXPECT_LE(testing::max_abs_diff(o.y_TH[t], want), 1e-4) << "token " << t << " norm " << norm;
      EXPECT_TRUE(at::equal(o.topk_idx_TK[t], idx));
    }
  }
}

TEST(Moe, LocalExpertsSkipEmptySlots) {
  at::manual_seed(3);
  auto ex = random_experts(2, 4, 3);
  at::Tensor x = at::randn({3, 4});
  at::Tensor idx = at::tensor({0, -1, -1, -1, 1, 0}, at::kLong).view({3, 2});
  at::Tensor w = at::tensor({0.5f, 0.f, 0.f, 0.f, 0.25f, 2.f}).view({3, 2});
  at::Tensor y = run_local_experts(ex, x, idx, w);
  auto f = [&](int64_t e, int64_t t) { return swiglu(x[t], ex[e].gate_IH, ex[e].up_IH, ex[e].down_HI); };
  EXPECT_LE(testing::max_abs_diff(y[0], 0.5 * f(0, 0)), 1e-5);
  EXPECT_EQ(y[1].abs().sum().item<float>(), 0.f);
  EXPECT_LE(testing::max_abs_diff(y[2], 0.25 * f(1, 2) + 2.0 * f(0, 2)), 1e-5);
}

// A rank that receives no rows (or only dropped slots) must still return a result on x's
// graph: EP backward is collective, and a rank whose backward skipped dispatch/combine hung
// the other (seen with 2 GPUs when the router sent every token to one rank's experts).
TEST(MoeBlock, NoLocalWorkStaysOnTheGraph) {
  at::manual_seed(5);
  std::vector<ExpertWeights> ex;
  for (int e = 0; e < 2; ++e) ex.push_back({at::randn({6, 4}), at::randn({6, 4}), at::randn({4, 6})});
  for (int64_t n : {0, 3}) {
    at::Tensor x = at::randn({n, 4}).requires_grad_();
    at::Tensor idx = at::full({n, 2}, -1, at::kLong), w = at::zeros({n, 2});
    at::Tensor y = run_local_experts(ex, x, idx, w);
    ASSERT_TRUE(y.requires_grad()) << "n=" << n;
    EXPECT_EQ(y.abs().sum().item<float>(), 0.f);
    y.sum().backward();
    ASSERT_TRUE(x.grad().defined()) << "n=" << n;
    EXPECT_EQ(x.grad().abs().sum().item<float>(), 0.f);
  }
}

// A one-rank group has nothing to route: moe_forward must not call it (its host-side layout
// costs a device-to-host copy and a host sync per layer on the GPU), and must give what the
// loopback group's dispatch and combine give, values, load and gradients.
TEST(MoeBlock, OneRankRunsTheExpertsWithoutCallingTheGroup) {
  at::manual_seed(7);
  const int64_t T = 11, H = 8, E = 6, I = 5, K = 2;
  MoeWeights w{at::randn({E, H}), random_experts(E, H, I)};
  const RouterConfig rc{E, K, true};
  at::Tensor x0 = at::randn({T, H});
  auto run = [&](ep::Group& g, bool direct) {
    at::Tensor x = x0.clone().requires_grad_(), router = w.router_EH.clone().requires_grad_();
    MoeWeights wx{router, w.experts};
    MoeOutput o;
    if (direct) {
      o = moe_forward(wx, x, rc, g);
    } else {  // the path before: through the loopback group's autograd dispatch and combine
      o.router_logits_TE = router_logits(wx, x, rc);
      route(o.router_logits_TE, rc, &o.topk_idx_TK, &o.topk_weight_TK);
      ep::Layout l = g.get_dispatch_layout(o.topk_idx_TK, E);
      o.expert_load_E = l.num_tokens_per_expert;
      ep::Dispatched d = ep::dispatch_autograd(g, x, o.topk_idx_TK, o.topk_weight_TK, l);
      o.y_TH = ep::combine_autograd(
          g, run_local_experts(wx.experts, d.recv_x_NH, d.recv_topk_idx_NK, d.recv_topk_weights_NK), d.handle);
    }
    (o.y_TH * at::linspace(-1, 1, T * H).view({T, H})).sum().backward();
    return std::make_tuple(o.y_TH.detach(), o.expert_load_E, x.grad(), router.grad());
  };
  testing::ShapeOnlyGroup uncalled(0, 1, E);  // throws if dispatched through
  auto [y, load, dx, drouter] = run(uncalled, true);
  auto [y_ref, load_ref, dx_ref, drouter_ref] = run(*ep::loopback_group(E), false);
  EXPECT_LE(testing::max_abs_diff(y, y_ref), 1e-6);
  EXPECT_TRUE(at::equal(load, load_ref)) << load << load_ref;
  EXPECT_EQ(load.sum().item<int64_t>(), T * K);
  EXPECT_LE(testing::max_abs_diff(dx, dx_ref), 1e-6);
  EXPECT_LE(testing::max_abs_diff(drouter, drouter_ref), 1e-6);
}

}  // namespace
}  // namespace moerl::model
