// Loopback group: dispatch/combine identities, dropped tokens, cached dispatch, autograd
// (against plain at:: math and finite differences). The contracts every backend shares
// (delivery, input checks, ...) run on loopback too, in conformance_test.cc.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ep/autograd.h"
#include "ep/ep.h"
#include "ep/test_moe.h"

namespace moerl::ep {
namespace {

TEST(Loopback, DispatchIsIdentityWhenEveryTokenRouted) {
  auto g = loopback_group(8);
  at::manual_seed(1);
  at::Tensor x = at::randn({16, 32});
  at::Tensor idx = at::randint(0, 8, {16, 2}, at::kLong);
  at::Tensor w = at::rand({16, 2});
  Layout l = g->get_dispatch_layout(idx, 8);
  Dispatched d = g->dispatch(x, idx, w, l);
  EXPECT_EQ(d.recv_x_NH.data_ptr(), x.data_ptr());  // no copy
  EXPECT_TRUE(d.recv_topk_idx_NK.equal(idx));
  EXPECT_TRUE(d.recv_topk_weights_NK.equal(w));
  int64_t total = 0;
  for (int64_t e = 0; e < 8; ++e) {
    EXPECT_EQ(d.num_recv_tokens_per_expert[e], idx.eq(e).sum().item<int64_t>());
    total += d.num_recv_tokens_per_expert[e];
  }
  EXPECT_EQ(total, 32);
  at::Tensor y = g->combine(d.recv_x_NH, d.handle);
  EXPECT_TRUE(y.equal(x));
}

TEST(Loopback, DroppedTokensAndSlots) {
  auto g = loopback_group(4);
  at::manual_seed(2);
  at::Tensor x = at::randn({6, 5}).to(at::kBFloat16);
  at::Tensor idx = at::tensor({0, 1, -1, -1, 3, -1, 2, 2, -1, -1, 1, 0}, at::kLong).view({6, 2});
  at::Tensor w = at::rand({6, 2}) + 0.1;
  Dispatched d = g->dispatch(x, idx, w, g->get_dispatch_layout(idx, 4));
  ASSERT_EQ(d.handle.num_recv, 4);  // tokens 1 and 4 have no expert
  at::Tensor kept = at::tensor({0, 2, 3, 5}, at::kLong);
  EXPECT_TRUE(d.recv_x_NH.equal(x.index_select(0, kept)));
  EXPECT_TRUE(d.recv_topk_idx_NK.equal(idx.index_select(0, kept)));
  at::Tensor expect_w = w.masked_fill(idx.lt(0), 0).index_select(0, kept);
  EXPECT_TRUE(d.recv_topk_weights_NK.equal(expect_w));
  at::Tensor y = g->combine(d.recv_x_NH * 2, d.handle);
  at::Tensor expect = (x * 2).index_fill(0, at::tensor({1, 4}, at::kLong), 0);
  EXPECT_TRUE(y.equal(expect));
  // Cached dispatch reuses routing: same rows of a different x.
  at::Tensor x2 = at::randn({6, 5}).to(at::kBFloat16);
  Dispatched d2 = g->dispatch(x2, at::Tensor(), at::Tensor(), Layout{}, &d.handle);
  EXPECT_TRUE(d2.recv_x_NH.equal(x2.index_select(0, kept)));
  EXPECT_TRUE(d2.recv_topk_idx_NK.equal(d.recv_topk_idx_NK));
}

// loss = sum(c * MoE(x)) computed through dispatch/combine vs. directly.
struct MoeLoss {
  testing::TinyMoe moe;
  at::Tensor c;
  at::Tensor through_ep(Group& g, const at::Tensor& x, const at::Tensor& idx, const at::Tensor& w) const {
    Dispatched d = dispatch_autograd(g, x, idx, w, g.get_dispatch_layout(idx, moe.num_experts));
    at::Tensor y_rows = moe.apply(d.recv_x_NH, d.recv_topk_idx_NK, d.recv_topk_weights_NK, 0,
                                  g.num_local_experts(), true);
    return (combine_autograd(g, y_rows, d.handle) * c).sum();
  }
  at::Tensor direct(const at::Tensor& x, const at::Tensor& idx, const at::Tensor& w) const {
    return (moe.apply(x, idx, w, 0, moe.num_experts, false) * c).sum();
  }
};

TEST(LoopbackAutograd, GradientsMatchDirectComputation) {
  auto g = loopback_group(6);
  MoeLoss f{testing::TinyMoe::make(8, 12, 6, 2, 7), at::Tensor()};
  f.c = at::randn({10, 8});
  at::Tensor idx = at::randint(0, 6, {10, 2}, at::kLong);
  idx[3].fill_(-1);  // one token routed nowhere
  idx[5][1] = -1;
  at::Tensor x = at::randn({10, 8}).requires_grad_(true);
  at::Tensor w = (at::rand({10, 2}) + 0.1).requires_grad_(true);
  at::Tensor loss = f.through_ep(*g, x, idx, w);
  auto grads = torch::autograd::grad({loss}, {x, w});
  at::Tensor x2 = x.detach().clone().requires_grad_(true);
  at::Tensor w2 = w.detach().clone().requires_grad_(true);
  at::Tensor loss2 = f.direct(x2, idx, w2);
  auto grads2 = torch::autograd::grad({loss2}, {x2, w2});
  EXPECT_NEAR(loss.item<double>(), loss2.item<double>(), 1e-5);
  EXPECT_TRUE(grads[0].allclose(grads2[0], 1e-5, 1e-6));
  EXPECT_TRUE(grads[1].allclose(grads2[1], 1e-5, 1e-6));
  EXPECT_GT(grads[0].abs().sum().item<double>(), 0);
  EXPECT_EQ(grads[0][3].abs().sum().item<double>(), 0);  // routed nowhere: no gradient
  EXPECT_EQ(grads[1][5][1].item<double>(), 0);
}

TEST(LoopbackAutograd, FiniteDifferences) {
  auto g = loopback_group(4);
  MoeLoss f{testing::TinyMoe::make(4, 6, 4, 2, 11), at::Tensor()};
  f.c = at::randn({5, 4});
  at::Tensor idx = at::randint(0, 4, {5, 2}, at::kLong);
  at::Tensor x = at::randn({5, 4}).requires_grad_(true);
  at::Tensor w = (at::rand({5, 2}) + 0.1).requires_grad_(true);
  auto grads = torch::autograd::grad({f.through_ep(*g, x, idx, w)}, {x, w});
  const double eps = 1e-2;
  at::NoGradGuard no_grad;
  for (int which = 0; which < 2; ++which) {
    at::Tensor p = which == 0 ? x : w;
    for (int64_t i = 0; i < p.numel(); ++i) {
      at::Tensor flat = p.view(-1);
      const float orig = flat[i].item<float>();
      flat[i] = orig + eps;
      const double up = f.through_ep(*g, x, idx, w).item<double>();
      flat[i] = orig - eps;
      const double down = f.through_ep(*g, x, idx, w).item<double>();
      flat[i] = orig;
      const double numeric = (up - down) / (2 * eps);
      EXPECT_NEAR(grads[which].view(-1)[i].item<double>(), numeric, 2e-3 + 1e-2 * std::abs(numeric))
          << (which == 0 ? "x" : "w") << " element " << i;
    }
  }
}

}  // namespace
}  // namespace moerl::ep
