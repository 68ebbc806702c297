// Entropy from logits, MoE load-balancing loss and router z-loss against hand-computed values.
#include "rl/aux_losses.h"

#include <cmath>

#include <gtest/gtest.h>

#include "rl/test_util.h"

namespace moerl::rl {
namespace {

using testing::expect_all_near;
using testing::t;

const double kLn3 = std::log(3.0);

// [0, 0] -> ln 2;  [0, ln 3] -> p = [1/4, 3/4], H = 0.5623351;  4 equal logits -> ln 4.
TEST(Entropy, HandComputed) {
  at::Tensor logits = t({0, 0, 0, 0, /**/ 0, kLn3, -1e9, -1e9, /**/ 2, 2, 2, 2}, {3, 4});
  expect_all_near(token_entropy(logits), {0.6931472 * 2, 0.5623351, 1.3862944});
  at::Tensor two = t({0, 0, 0, kLn3}, {2, 2});
  expect_all_near(token_entropy(two), {0.6931472, 0.5623351});
}

// Layer 1: T = 4, E = 2, K = 1. softmax rows: [.5,.5], [.25,.75], [.25,.75], [.75,.25]
//   P = [1.75/4, 2.25/4] = [0.4375, 0.5625]; idx [1,1,1,0] -> f = [0.25, 0.75]
//   loss = 2 * (0.25*0.4375 + 0.75*0.5625) = 1.0625
// Layer 2: T = 2, E = 2, K = 2 with uniform probabilities -> loss = 1 whatever f is.
TEST(LoadBalancing, HandComputed) {
  at::Tensor l1 = t({0, 0, 0, kLn3, 0, kLn3, kLn3, 0}, {4, 2});
  at::Tensor i1 = at::tensor({1, 1, 1, 0}, at::kLong).reshape({4, 1});
  EXPECT_NEAR(load_balancing_loss(l1, i1, 2).item<double>(), 1.0625, 1e-6);
  at::Tensor l2 = t({0.3, 0.3, -1, -1}, {2, 2});
  at::Tensor i2 = at::tensor({0, 1, 1, 0}, at::kLong).reshape({2, 2});
  EXPECT_NEAR(load_balancing_loss(l2, i2, 2).item<double>(), 1.0, 1e-6);
  // Layer 2 padded to 4 tokens and masked, averaged with layer 1: (1.0625 + 1) / 2.
  at::Tensor l2p = at::cat({l2, t({5, -5, 5, -5}, {2, 2})});
  at::Tensor i2p = at::cat({i2, at::zeros({2, 2}, at::kLong)});
  at::Tensor l1m = l1;
  // Masking the last token of layer 1: P = [1/3, 2/3], f = [0, 1] -> 2 * 2/3 = 1.3333333.
  at::Tensor mask = t({1, 1, 1, 0});
  EXPECT_NEAR(load_balancing_loss(l1m, i1, 2, mask).item<double>(), 1.3333333, 1e-6);
  at::Tensor mask2 = t({1, 1, 0, 0});
  EXPECT_NEAR(load_balancing_loss(l2p, i2p, 2, mask2).item<double>(), 1.0, 1e-6);
  EXPECT_NEAR(load_balancing_loss({l1, l2}, {i1, i2}, 2).item<double>(), 1.03125, 1e-6);
}

// d loss / d z_tj = (E/T) * p_tj * (f_j - sum_e f_e p_te). Token 0 (p = [.5,.5], f = [.25,.75]):
//   j=0: 0.5*0.5*(0.25 - 0.5) = -0.0625;  j=1: +0.0625
// Token 1 (p = [.25,.75], sum_e f_e p_e = 0.625): j=0: 0.5*0.25*(0.25-0.625) = -0.046875, j=1: +0.046875
TEST(LoadBalancing, GradientHandComputed) {
  at::Tensor l1 = t({0, 0, 0, kLn3, 0, kLn3, kLn3, 0}, {4, 2}).requires_grad_(true);
  at::Tensor i1 = at::tensor({1, 1, 1, 0}, at::kLong).reshape({4, 1});
  load_balancing_loss(l1, i1, 2).backward();
  at::Tensor g = l1.grad();
  EXPECT_NEAR(g[0][0].item<double>(), -0.0625, 1e-6);
  EXPECT_NEAR(g[0][1].item<double>(), 0.0625, 1e-6);
  EXPECT_NEAR(g[1][0].item<double>(), -0.046875, 1e-6);
  EXPECT_NEAR(g[1][1].item<double>(), 0.046875, 1e-6);
}

// logsumexp [0, 0] = ln 2, [0, ln 3] = ln 4: mean of squares (0.480453 + 1.921812) / 2.
// Gradient: d/dz (lse^2)/T = 2 lse softmax / T: token 0 -> 2 ln2 * 0.5 / 2 = 0.3465736.
TEST(RouterZLoss, HandComputed) {
  at::Tensor l = t({0, 0, 0, kLn3}, {2, 2}).requires_grad_(true);
  at::Tensor z = router_z_loss(l);
  EXPECT_NEAR(z.item<double>(), 1.2011325, 1e-6);
  z.backward();
  EXPECT_NEAR(l.grad()[0][0].item<double>(), 0.3465736, 1e-6);
  EXPECT_NEAR(router_z_loss(l, t({0, 1})).item<double>(), 1.9218121, 1e-6);
  EXPECT_NEAR(router_z_loss(std::vector<at::Tensor>{l, l}).item<double>(), 1.2011325, 1e-6);
}

}  // namespace
}  // namespace moerl::rl
