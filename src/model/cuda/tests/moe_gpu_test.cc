// GPU MoE pieces against the CPU path in float64: fused SwiGLU (forward and backward), the
// device-side expert sort, grouped experts (forward and every gradient) and the block.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include "model/cuda/tests/gpu_test_util.h"
#include "model/common/layers.h"
#include "model/common/moe.h"
#include "model/cuda/moe_gpu.h"

namespace moerl::model {
namespace {

using ::moerl::testing::rel_err;

TEST(MoeGpu, SwigluForwardBackward) {
  for (auto dt : {at::kFloat, at::kBFloat16}) {
    for (int64_t I : {768, 13}) {
      at::Tensor gu = at::randn({257, 2 * I}, at::kDouble);
      at::Tensor dh = at::randn({257, I}, at::kDouble);
      at::Tensor g_ref = gu.clone().requires_grad_(true);
      at::Tensor h_ref = at::silu(g_ref.narrow(1, 0, I)) * g_ref.narrow(1, I, I);
      h_ref.backward(dh);
      at::Tensor g = gu.to(at::kCUDA, dt).requires_grad_(true);
      at::Tensor h = cuda::swiglu(g);
      h.backward(dh.to(at::kCUDA, dt));
      const double tol = dt == at::kFloat ? 1e-5 : 1e-2;
      EXPECT_LT(rel_err(h, h_ref), tol) << "I=" << I;
      EXPECT_LT(rel_err(g.grad(), g_ref.grad()), tol) << "I=" << I;
    }
  }
}

TEST(MoeGpu, SortByExpertGroupsEntries) {
  const int64_t T = 1000, K = 4, E = 16;
  at::Tensor idx = at::rand({T, E}).argsort(int64_t{1}, false).narrow(1, 0, K).contiguous();
  idx.masked_fill_(at::rand({T, K}).lt(0.05), -1);
  cuda::ExpertSort s = cuda::sort_by_expert(idx.cuda(), E);
  at::Tensor offs = s.offs.cpu().to(at::kLong), pos = s.pos_TK.cpu(), src = s.src_token.cpu();
  at::Tensor counts = at::bincount(idx.view(-1).clamp_min(-1).add(1), {}, E + 1).narrow(0, 1, E);
  EXPECT_TRUE(at::equal(offs, counts.cumsum(0)));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t p = pos[t][k].item<int64_t>();
      if (idx[t][k].item<int64_t>() < 0) {
        EXPECT_EQ(p, -1);
        continue;
      }
      ASSERT_GE(p, 0);
      EXPECT_EQ(src[p].item<int64_t>(), t);
      const int64_t e = idx[t][k].item<int64_t>();
      EXPECT_LT(p, offs[e].item<int64_t>());
      EXPECT_GE(p, e == 0 ? 0 : offs[e - 1].item<int64_t>());
    }
}

// grouped_experts on the GPU vs run_local_experts on the CPU in float64, values and grads.
void check_grouped(at::ScalarType dt, double tol) {
  const int64_t N = 600, H = 64, I = 32, E = 8, K = 3;
  std::vector<ExpertWeights> ref_w;
  at::Tensor w13 = at::randn({E, 2 * I, H}, at::kDouble) * 0.2, w2 = at::randn({E, H, I}, at::kDouble) * 0.2;
  at::Tensor x = at::randn({N, H}, at::kDouble);
  at::Tensor idx = at::rand({N, E}).argsort(int64_t{1}, false).narrow(1, 0, K).contiguous();
  idx.masked_fill_(at::rand({N, K}).lt(0.1), -1);
  at::Tensor w = at::rand({N, K}, at::kDouble).masked_fill(idx.lt(0), 0.0);
  at::Tensor dy = at::randn({N, H}, at::kDouble);

  at::Tensor xr = x.clone().requires_grad_(true), wr = w.clone().requires_grad_(true);
  at::Tensor w13r = w13.clone().requires_grad_(true), w2r = w2.clone().requires_grad_(true);
  for (int64_t e = 0; e < E; ++e)
    ref_w.push_back({w13r[e].narrow(0, 0, I), w13r[e].narrow(0, I, I), w2r[e]});
  at::Tensor yr = run_local_experts(ref_w, xr, idx, wr);
  yr.backward(dy);

  auto opt = at::TensorOptions().device(at::kCUDA).dtype(dt);
  at::Tensor xg = x.to(opt).requires_grad_(true), wg = w.to(at::kCUDA, at::kFloat).requires_grad_(true);
  at::Tensor w13g = w13.to(opt).requires_grad_(true), w2g = w2.to(opt).requires_grad_(true);
  at::Tensor yg = cuda::grouped_experts(xg, idx.cuda(), wg, w13g, w2g);
  yg.backward(dy.to(opt));
  EXPECT_LT(rel_err(yg, yr), tol);
  EXPECT_LT(rel_err(xg.grad(), xr.grad()), tol);
  // Dropped entries carry no gradient in the reference either (masked weights).
  at::Tensor wgrad = wg.grad().cpu().masked_fill(idx.lt(0), 0.0);
  EXPECT_LT(rel_err(wgrad, wr.grad().masked_fill(idx.lt(0), 0.0)), tol);
  EXPECT_LT(rel_err(w13g.grad(), w13r.grad()), tol);
  EXPECT_LT(rel_err(w2g.grad(), w2r.grad()), tol);
}

TEST(MoeGpu, GroupedExpertsMatchCpuFloat32) { check_grouped(at::kFloat, 1e-4); }
TEST(MoeGpu, GroupedExpertsMatchCpuBf16) { check_grouped(at::kBFloat16, 2e-2); }

TEST(MoeGpu, BlockMatchesCpuMoeForward) {
  // CPU reference in float32 (the ep groups carry float32/bf16 payloads).
  const int64_t T = 512, H = 128, I = 64, E = 16, K = 4;
  RouterConfig rc{E, K, true};
  at::Tensor router = at::randn({E, H}) * 0.1;
  at::Tensor w13 = at::randn({E, 2 * I, H}) * 0.1, w2 = at::randn({E, H, I}) * 0.1;
  at::Tensor x = at::randn({T, H});
  MoeWeights mw{router, {}};
  for (int64_t e = 0; e < E; ++e) mw.experts.push_back({w13[e].narrow(0, 0, I), w13[e].narrow(0, I, I), w2[e]});
  auto group = ep::loopback_group(E);
  MoeOutput ref = moe_forward(mw, x, rc, *group);
  auto opt = at::TensorOptions().device(at::kCUDA).dtype(at::kFloat);
  MoeOutput got = cuda::moe_block({router.to(opt), w13.to(opt), w2.to(opt)}, x.to(opt), rc);
  EXPECT_TRUE(at::equal(got.topk_idx_TK.cpu(), ref.topk_idx_TK));
  EXPECT_LT(rel_err(got.y_TH, ref.y_TH), 1e-4);
}

}  // namespace
}  // namespace moerl::model
