// MoE block against a naive per-token reference, router semantics, skipped -1 slots.
#include <gtest/gtest.h>

#include "model/common/layers.h"
#include "model/common/moe.h"
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

}  // namespace
}  // namespace moerl::model
