// packed_for_grad: the packed expert tensors of a grad-mode forward alias the parameters'
// storage (no stack), and their gradients land in the per-expert .grad tensors through one
// packed buffer: values as autograd through a stack gives them, accumulated over backward
// passes, after the optimizer's in-place zeroing, and after a grad was dropped or replaced.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "model/common/expert_grad.h"
#include "model/test_util.h"

namespace moerl::model {
namespace {

constexpr int64_t E = 3, I = 5, H = 4;

std::vector<ExpertWeights> packed_leaves(uint64_t seed) {
  at::manual_seed(seed);
  std::vector<ExpertWeights> loose;
  for (int e = 0; e < E; ++e) loose.push_back({at::randn({I, H}), at::randn({I, H}), at::randn({H, I})});
  std::vector<ExpertWeights> v = pack_experts(loose);
  for (ExpertWeights& x : v) {
    for (at::Tensor* t : {&x.gate_IH, &x.up_IH, &x.down_HI}) *t = t->detach().set_requires_grad(true);
  }
  return v;
}

// sum(A * w13) + sum(B * w2): d/dw13 = A, d/dw2 = B.
void backward_once(const PackedExperts& p, const at::Tensor& A, const at::Tensor& B) {
  ((p.w13_E2IH * A).sum() + (p.w2_EHI * B).sum()).backward();
}

void expect_grads(const std::vector<ExpertWeights>& ex, const at::Tensor& A, const at::Tensor& B, double times) {
  for (int64_t e = 0; e < E; ++e) {
    const ExpertWeights& x = ex[static_cast<size_t>(e)];
    ASSERT_TRUE(x.gate_IH.grad().defined() && x.up_IH.grad().defined() && x.down_HI.grad().defined()) << e;
    EXPECT_TRUE(at::allclose(x.gate_IH.grad(), times * A[e].narrow(0, 0, I))) << "expert " << e;
    EXPECT_TRUE(at::allclose(x.up_IH.grad(), times * A[e].narrow(0, I, I))) << "expert " << e;
    EXPECT_TRUE(at::allclose(x.down_HI.grad(), times * B[e])) << "expert " << e;
  }
}

TEST(ExpertGrad, ForwardAliasesTheParametersAndGradsShareOneBuffer) {
  std::vector<ExpertWeights> ex = packed_leaves(1);
  PackedExperts p = packed_for_grad(ex);
  ASSERT_TRUE(p.w13_E2IH.defined());
  EXPECT_TRUE(p.w13_E2IH.requires_grad());
  EXPECT_EQ(p.w13_E2IH.data_ptr(), ex[0].gate_IH.data_ptr()) << "a copy, not the parameters' storage";
  EXPECT_EQ(p.w2_EHI.data_ptr(), ex[0].down_HI.data_ptr());
  EXPECT_TRUE(at::equal(p.w13_E2IH[2].narrow(0, I, I), ex[2].up_IH));
  const at::Tensor A = at::randn({E, 2 * I, H}), B = at::randn({E, H, I});
  backward_once(p, A, B);
  expect_grads(ex, A, B, 1);
  // The grads are plain tensors over one packed buffer per projection, in the packed layout.
  std::vector<ExpertWeights> grads;
  for (const ExpertWeights& x : ex) grads.push_back({x.gate_IH.grad(), x.up_IH.grad(), x.down_HI.grad()});
  EXPECT_TRUE(packed_view(grads).w13_E2IH.defined());
  EXPECT_FALSE(ex[1].up_IH.grad().is_view());
}

TEST(ExpertGrad, AccumulatesAcrossBackwardsAndSurvivesTheOptimizersZeroing) {
  std::vector<ExpertWeights> ex = packed_leaves(2);
  const at::Tensor A = at::randn({E, 2 * I, H}), B = at::randn({E, H, I});
  backward_once(packed_for_grad(ex), A, B);
  backward_once(packed_for_grad(ex), A, B);  // two micro-batches
  expect_grads(ex, A, B, 2);
  for (ExpertWeights& x : ex) {  // AdamW::zero_grad
    for (at::Tensor* t : {&x.gate_IH, &x.up_IH, &x.down_HI}) {
      t->mutable_grad().detach_();
      t->mutable_grad().zero_();
    }
  }
  backward_once(packed_for_grad(ex), A, B);
  expect_grads(ex, A, B, 1);
}

TEST(ExpertGrad, ADroppedOrReplacedGradIsCarriedIntoANewBuffer) {
  std::vector<ExpertWeights> ex = packed_leaves(3);
  const at::Tensor A = at::randn({E, 2 * I, H}), B = at::randn({E, H, I});
  backward_once(packed_for_grad(ex), A, B);
  ex[0].gate_IH.mutable_grad() = at::Tensor();                        // dropped: starts from zero
  ex[2].down_HI.mutable_grad() = ex[2].down_HI.grad().clone().mul_(3);  // replaced: its value is kept
  backward_once(packed_for_grad(ex), A, B);
  EXPECT_TRUE(at::allclose(ex[0].gate_IH.grad(), A[0].narrow(0, 0, I)));
  EXPECT_TRUE(at::allclose(ex[2].down_HI.grad(), 4 * B[2]));
  EXPECT_TRUE(at::allclose(ex[1].up_IH.grad(), 2 * A[1].narrow(0, I, I)));
}

TEST(ExpertGrad, MatchesAutogradThroughAStack) {
  std::vector<ExpertWeights> ex = packed_leaves(4), ref = packed_leaves(4);
  at::Tensor x = at::randn({7, H});
  auto loss = [&](const at::Tensor& w13, const at::Tensor& w2) {
    // A product through both stacks, as the grouped experts use them.
    at::Tensor h = at::einsum("th,eih->tei", {x, w13}).narrow(2, 0, I).tanh();
    return at::einsum("tei,ehi->th", {h, w2}).pow(2).sum();
  };
  PackedExperts p = packed_for_grad(ex);
  loss(p.w13_E2IH, p.w2_EHI).backward();
  std::vector<at::Tensor> gates, ups, downs;
  for (const ExpertWeights& r : ref) {
    gates.push_back(r.gate_IH);
    ups.push_back(r.up_IH);
    downs.push_back(r.down_HI);
  }
  loss(at::cat({at::stack(gates), at::stack(ups)}, 1), at::stack(downs)).backward();
  for (int64_t e = 0; e < E; ++e) {
    const size_t i = static_cast<size_t>(e);
    EXPECT_TRUE(at::allclose(ex[i].gate_IH.grad(), ref[i].gate_IH.grad(), 1e-5, 1e-6)) << e;
    EXPECT_TRUE(at::allclose(ex[i].up_IH.grad(), ref[i].up_IH.grad(), 1e-5, 1e-6)) << e;  // zero: unused rows
    EXPECT_TRUE(at::allclose(ex[i].down_HI.grad(), ref[i].down_HI.grad(), 1e-5, 1e-6)) << e;
  }
}

TEST(ExpertGrad, LooseOrFrozenExpertsAreLeftToTheCaller) {
  std::vector<ExpertWeights> loose{{at::randn({I, H}), at::randn({I, H}), at::randn({H, I})}};
  EXPECT_FALSE(packed_for_grad(loose).w13_E2IH.defined());
  std::vector<ExpertWeights> frozen = pack_experts(packed_leaves(5));
  PackedExperts p = packed_for_grad(frozen);
  ASSERT_TRUE(p.w13_E2IH.defined());
  EXPECT_FALSE(p.w13_E2IH.requires_grad());
  std::vector<ExpertWeights> partly = packed_leaves(6);
  partly[1].up_IH.requires_grad_(false);  // one frozen tensor: left to the caller's stack
  EXPECT_FALSE(packed_for_grad(partly).w13_E2IH.defined());
}

}  // namespace
}  // namespace moerl::model
