// The fused CPU experts op against a dense reference (every expert on every token, masked by
// its combine weight): outputs and gradients of x, the combine weights and each expert's
// matrices, with dropped (-1) slots and an idle expert that must get no gradient at all.
#include <gtest/gtest.h>

#include "model/common/cpu_experts.h"
#include "model/common/layers.h"

namespace moerl::model {
namespace {

TEST(CpuExperts, MatchesDenseReferenceWithGradients) {
  const int64_t N = 9, H = 6, I = 5, E = 4, K = 2;
  at::manual_seed(5);
  auto f64 = at::TensorOptions().dtype(at::kDouble);
  at::Tensor x0 = at::randn({N, H}, f64), w0 = at::rand({N, K}, f64);
  // Expert 3 is idle; rows 2 and 7 drop one slot each.
  at::Tensor idx = at::tensor({0, 1, 1, 2, 0, -1, 2, 1, 0, 2, 1, 0, 2, 0, -1, 1, 1, 2}, at::kLong).view({N, K});
  std::vector<at::Tensor> mats;
  for (int64_t e = 0; e < E; ++e) {
    mats.push_back(at::randn({I, H}, f64) * 0.5);
    mats.push_back(at::randn({I, H}, f64) * 0.5);
    mats.push_back(at::randn({H, I}, f64) * 0.5);
  }
  at::Tensor go = at::randn({N, H}, f64);

  auto run = [&](bool fused) {
    at::Tensor x = x0.clone().set_requires_grad(true), w = w0.clone().set_requires_grad(true);
    std::vector<ExpertWeights> ex;
    std::vector<at::Tensor> leaves;
    for (int64_t e = 0; e < E; ++e) {
      for (int m = 0; m < 3; ++m) leaves.push_back(mats[3 * e + m].clone().set_requires_grad(true));
      ex.push_back({leaves[3 * e], leaves[3 * e + 1], leaves[3 * e + 2]});
    }
    at::Tensor y;
    if (fused) {
      y = cpu_experts(ex, x, idx, w);
    } else {
      y = at::zeros({N, H}, f64);
      for (int64_t e = 0; e < E; ++e) {
        at::Tensor weight_N = (w * idx.eq(e).to(at::kDouble)).sum(1, /*keepdim=*/true);
        y = y + weight_N * swiglu(x, ex[e].gate_IH, ex[e].up_IH, ex[e].down_HI);
      }
    }
    y.backward(go);
    std::vector<at::Tensor> out = {y.detach(), x.grad(), w.grad()};
    for (auto& l : leaves) out.push_back(l.grad());
    return out;
  };
  ASSERT_TRUE(cpu_experts_apply(x0));
  std::vector<at::Tensor> f = run(true), r = run(false);
  for (size_t i = 0; i < f.size(); ++i) {
    const bool idle = i >= 3 + 9;  // expert 3's matrices
    if (idle) {
      EXPECT_FALSE(f[i].defined()) << "idle expert must stay out of the graph (tensor " << i << ")";
      continue;
    }
    ASSERT_TRUE(f[i].defined()) << i;
    EXPECT_LT((f[i] - r[i]).abs().max().item<double>(), 1e-10) << "tensor " << i;
    EXPECT_GT(f[i].abs().max().item<double>(), 1e-3) << "tensor " << i << " should not be trivially zero";
  }
  // Dropped slots get no weight gradient.
  EXPECT_EQ(f[2][2][1].item<double>(), 0.0);
  EXPECT_EQ(f[2][7][0].item<double>(), 0.0);
}

TEST(CpuExperts, FloatMatchesDoubleAndRejectsBadIds) {
  at::manual_seed(6);
  const int64_t N = 16, H = 8, I = 8;
  std::vector<ExpertWeights> ex32, ex64;
  for (int e = 0; e < 2; ++e) {
    at::Tensor g = at::randn({I, H}), u = at::randn({I, H}), d = at::randn({H, I});
    ex32.push_back({g, u, d});
    ex64.push_back({g.to(at::kDouble), u.to(at::kDouble), d.to(at::kDouble)});
  }
  at::Tensor x = at::randn({N, H}), w = at::rand({N, 1});
  at::Tensor idx = at::randint(0, 2, {N, 1}, at::kLong);
  at::Tensor y32 = cpu_experts(ex32, x, idx, w), y64 = cpu_experts(ex64, x.to(at::kDouble), idx, w);
  EXPECT_LT((y32.to(at::kDouble) - y64).abs().max().item<double>(), 1e-4);
  EXPECT_ANY_THROW(cpu_experts(ex32, x, at::full({N, 1}, 2, at::kLong), w));
}

}  // namespace
}  // namespace moerl::model
