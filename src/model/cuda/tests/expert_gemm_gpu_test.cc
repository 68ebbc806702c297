// The decode path of grouped_experts (expert_gemm: few rows per expert, fused SwiGLU, rows
// gathered in place) against a float32 reference computed expert by expert, and against the
// at::_grouped_mm path, at the Qwen3-30B-A3B expert shape: spread and skewed routing (an
// expert with many rows takes several passes), dropped entries, experts with no rows, and
// rows that do not depend on the rest of the batch.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include "model/cuda/expert_gemm.h"
#include "model/cuda/moe_gpu.h"
#include "model/cuda/tests/gpu_test_util.h"

namespace moerl::model {
namespace {

using ::moerl::testing::rel_err;

constexpr int64_t E = 128, K = 8, H = 2048, I = 768;

struct Weights {
  at::Tensor w13, w2;  // bf16 [E,2I,H], [E,H,I] on the GPU
};

Weights make_weights() {
  auto opt = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  return {at::randn({E, 2 * I, H}, opt) * 0.02, at::randn({E, H, I}, opt) * 0.02};
}

// Routing of T tokens: K distinct experts each, ~5% dropped; `skewed`: every token's first
// choice is expert 0 (T rows for one expert).
std::pair<at::Tensor, at::Tensor> make_routing(int64_t T, bool skewed) {
  at::Tensor idx = at::rand({T, E}).argsort(int64_t{1}, false).narrow(1, 0, K).contiguous();
  if (skewed) {
    idx = at::where(idx.eq(0), idx.select(1, 0).unsqueeze(1), idx);  // keep the row's ids distinct
    idx.select(1, 0).fill_(0);
  }
  idx.masked_fill_(at::rand({T, K}).lt(0.05), -1);
  at::Tensor w = at::rand({T, K}).masked_fill(idx.lt(0), 0.0);
  return {idx.cuda(), w.cuda()};
}

// Expert by expert in float32 on the GPU, with the decode path's bf16 roundings (gate/up
// products, the SwiGLU output, the down product).
at::Tensor reference(const Weights& wt, const at::Tensor& x, const at::Tensor& idx, const at::Tensor& w) {
  at::NoGradGuard ng;
  at::Tensor out = at::zeros({x.size(0), H}, x.options().dtype(at::kFloat));
  for (int64_t e = 0; e < E; ++e) {
    at::Tensor hit = idx.eq(e).nonzero();  // [n, 2]: token, slot
    if (hit.size(0) == 0) continue;
    at::Tensor tok = hit.select(1, 0), slot = hit.select(1, 1);
    at::Tensor gu = at::matmul(x.index_select(0, tok).to(at::kFloat), wt.w13[e].to(at::kFloat).t())
                        .to(at::kBFloat16)
                        .to(at::kFloat);
    at::Tensor h = (at::silu(gu.narrow(1, 0, I)) * gu.narrow(1, I, I)).to(at::kBFloat16).to(at::kFloat);
    at::Tensor y = at::matmul(h, wt.w2[e].to(at::kFloat).t()).to(at::kBFloat16).to(at::kFloat);
    out.index_add_(0, tok, y * w.index({tok, slot}).unsqueeze(1));
  }
  return out;
}

at::Tensor run(const Weights& wt, const at::Tensor& x, const at::Tensor& idx, const at::Tensor& w, bool small) {
  at::NoGradGuard ng;
  const bool was = cuda::expert_gemm_in_use();
  cuda::use_expert_gemm(small);
  at::Tensor y = cuda::grouped_experts(x, idx, w, wt.w13, wt.w2);
  cuda::use_expert_gemm(was);
  return y;
}

TEST(ExpertGemmGpu, DecodePathMatchesAFloat32Reference) {
  ASSERT_TRUE(cuda::expert_gemm_fits(I, H, true) && cuda::expert_gemm_fits(H, I, false));
  at::manual_seed(3);
  const Weights wt = make_weights();
  for (auto [T, skewed] : {std::pair<int64_t, bool>{1, false}, {37, false}, {256, false}, {256, true}, {384, false}}) {
    auto [idx, w] = make_routing(T, skewed);
    at::Tensor x = at::randn({T, H}, at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16));
    const at::Tensor ref = reference(wt, x, idx, w);
    const at::Tensor small = run(wt, x, idx, w, true), grouped = run(wt, x, idx, w, false);
    ASSERT_TRUE(small.isfinite().all().item<bool>()) << "T=" << T;
    EXPECT_LT(rel_err(small, ref), 1e-2) << "T=" << T << " skewed=" << skewed;
    EXPECT_LT(rel_err(grouped, ref), 1e-2) << "T=" << T << " skewed=" << skewed;
    EXPECT_LT(rel_err(small, grouped), 1e-2) << "T=" << T << " skewed=" << skewed;
    // A token whose entries are all dropped gets exactly zero.
    if (T == 37) {
      at::Tensor idx2 = idx.clone(), w2 = w.clone();
      idx2[5].fill_(-1);
      w2[5].fill_(0);
      EXPECT_EQ(run(wt, x, idx2, w2, true)[5].abs().max().item<float>(), 0.f);
    }
  }
}

TEST(ExpertGemmGpu, RowsDoNotDependOnTheBatch) {
  // The same 37 tokens alone and as the head of a batch of 256: bitwise equal outputs (each
  // output row reads only its own input row; the rows per expert and the passes differ).
  at::manual_seed(4);
  const Weights wt = make_weights();
  auto [idx, w] = make_routing(256, false);
  at::Tensor x = at::randn({256, H}, at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16));
  const at::Tensor all = run(wt, x, idx, w, true);
  const at::Tensor head = run(wt, x.narrow(0, 0, 37).contiguous(), idx.narrow(0, 0, 37).contiguous(),
                              w.narrow(0, 0, 37).contiguous(), true);
  EXPECT_TRUE(at::equal(all.narrow(0, 0, 37), head));
}

TEST(ExpertGemmGpu, RefusesSizesItDoesNotTake) {
  EXPECT_FALSE(cuda::expert_gemm_fits(768, 2000, true));  // k not a multiple of 64
  EXPECT_FALSE(cuda::expert_gemm_fits(24, 2048, true));   // 16 columns per warp
  EXPECT_FALSE(cuda::expert_gemm_fits(48, 2048, false));  // 32 columns per warp
  EXPECT_EQ(cuda::expert_gemm(nullptr, nullptr, nullptr, nullptr, E, 48, 2048, false, nullptr, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace moerl::model
