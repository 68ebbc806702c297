// The decode path of grouped_experts (expert_gemm: few rows per expert, fused SwiGLU, rows
// gathered in place) against a float32 reference computed expert by expert, and against the
// at::_grouped_mm path, at the Qwen3-30B-A3B expert shape: spread and skewed routing (an
// expert with many rows takes several passes), dropped entries, experts with no rows, and
// rows that do not depend on the rest of the batch.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include "model/cuda/decode_kernels.h"
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
  const cuda::DecodeKernels was = cuda::decode_kernels();
  cuda::set_decode_kernels({.experts = small, .attention = was.attention});
  at::Tensor y = cuda::grouped_experts(x, idx, w, wt.w13, wt.w2);
  cuda::set_decode_kernels(was);
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
    // Other accumulation orders: not bitwise equal, so the decode path did run.
    if (T >= 37) EXPECT_FALSE(at::equal(small, grouped)) << "T=" << T << ": the at:: path ran for both";
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

TEST(ExpertGemmGpu, PlanGroupsEntriesByExpert) {
  // Every kept entry gets its own row inside its expert's group; dropped ones (-1, or ids
  // outside [0, E)) get -1 and weight 0; the weights come out as float32.
  at::manual_seed(5);
  const int64_t T = 300;
  auto [idx, w] = make_routing(T, true);
  idx[7][3] = E;  // out of range: dropped
  const at::Tensor wb = w.to(at::kBFloat16);
  auto lopt = idx.options();
  at::Tensor offs = at::empty({E}, lopt.dtype(at::kInt)), src = at::full({T * K}, -7, lopt);
  at::Tensor pos = at::empty({T, K}, lopt), wf = at::empty({T, K}, lopt.dtype(at::kFloat));
  ASSERT_EQ(cuda::expert_plan(idx.data_ptr<int64_t>(), wb.data_ptr(), true, T, K, E, offs.data_ptr<int32_t>(),
                              src.data_ptr<int64_t>(), pos.data_ptr<int64_t>(), wf.data_ptr<float>(), nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const at::Tensor ic = idx.cpu(), pc = pos.cpu(), sc = src.cpu(), oc = offs.cpu().to(at::kLong);
  const at::Tensor kept = ic.ge(0).logical_and(ic.lt(E));
  const at::Tensor counts = at::bincount(ic.masked_select(kept), {}, E);
  EXPECT_TRUE(at::equal(oc, counts.cumsum(0)));
  EXPECT_TRUE(at::equal(pc.lt(0), kept.logical_not()));
  EXPECT_TRUE(at::equal(wf.cpu(), wb.to(at::kFloat).cpu().masked_fill(kept.logical_not(), 0.f)));
  const at::Tensor rows = pc.masked_select(kept);
  EXPECT_EQ(std::get<0>(at::_unique(rows)).numel(), rows.numel());  // one row per entry
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t k = 0; k < K; ++k) {
      const int64_t e = ic[t][k].item<int64_t>(), p = pc[t][k].item<int64_t>();
      if (e < 0 || e >= E) continue;
      EXPECT_GE(p, e == 0 ? 0 : oc[e - 1].item<int64_t>());
      EXPECT_LT(p, oc[e].item<int64_t>());
      EXPECT_EQ(sc[p].item<int64_t>(), t);
    }
  }
}

TEST(ExpertGemmGpu, RefusesSizesItDoesNotTake) {
  EXPECT_FALSE(cuda::expert_gemm_fits(768, 2000, true));  // k not a multiple of 64
  EXPECT_FALSE(cuda::expert_gemm_fits(24, 2048, true));   // 16 columns per warp
  EXPECT_FALSE(cuda::expert_gemm_fits(48, 2048, false));  // 32 columns per warp
  EXPECT_EQ(cuda::expert_gemm(nullptr, nullptr, nullptr, nullptr, E, 48, 2048, false, nullptr, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cuda::expert_plan(nullptr, nullptr, true, 1, K, cuda::kExpertPlanMaxExperts + 1, nullptr, nullptr, nullptr,
                              nullptr, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace moerl::model
