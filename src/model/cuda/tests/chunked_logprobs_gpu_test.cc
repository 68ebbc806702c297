// Chunked token scoring (train/chunked_logprobs.h) on the GPU at Qwen3's real vocabulary
// (151936) and hidden size (2048), bf16 as the trainer's policy runs: log-probabilities,
// entropies and both gradients equal the full-logits path's, with the generic chunk math and
// with the fused row kernels (model/cuda/token_stats.h), and the peak memory of the gradient
// pass is the O(chunk x V) working set, not the [B,T,V] float32 logits.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include <cstdio>

#include "model/cuda/tests/gpu_test_util.h"
#include "base/error.h"
#include "model/cuda/token_stats.h"
#include "model/sampler.h"
#include "rl/aux_losses.h"
#include "train/chunked_logprobs.h"
#include "train/packed_batch.h"

namespace moerl::train {
namespace {

using ::moerl::testing::rel_err;

int64_t peak_bytes() { return c10::cuda::CUDACachingAllocator::getDeviceStats(0).allocated_bytes[0].peak; }

class ChunkedLogprobsGpu : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    set_token_stats_kernels(GetParam() ? TokenStatsKernels{&model::cuda::token_stats_forward,
                                                           &model::cuda::token_stats_backward}
                                       : TokenStatsKernels{});
  }
  void TearDown() override { set_token_stats_kernels({}); }
};

INSTANTIATE_TEST_SUITE_P(Paths, ChunkedLogprobsGpu, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Fused" : "Generic"; });

TEST_P(ChunkedLogprobsGpu, RealVocabularyBf16MatchesTheFullPathInLessMemory) {
  const int64_t B = 4, T = 1024, H = 2048, V = 151936;
  const auto bf16 = at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA);
  at::manual_seed(7);
  at::Tensor h0 = at::randn({B, T, H}, bf16), w0 = (at::randn({V, H}, bf16) * 0.02).to(at::kBFloat16);
  at::Tensor ids = at::randint(V, {B, T}, at::TensorOptions().dtype(at::kLong).device(at::kCUDA));
  at::Tensor mask = at::zeros({B, T}, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA));
  mask.narrow(1, 256, T - 256).fill_(1);  // a 256-token prompt, then the response
  at::Tensor r = at::randn({B, T}, at::TensorOptions().device(at::kCUDA));
  model::SamplingConfig s;
  s.temperature = 0.9;

  auto run = [&](bool chunked, at::Tensor& lp, at::Tensor& ent, at::Tensor& gh, at::Tensor& gw) {
    at::Tensor h = h0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
    c10::cuda::CUDACachingAllocator::emptyCache();
    c10::cuda::CUDACachingAllocator::resetPeakStats(0);
    const int64_t base = c10::cuda::CUDACachingAllocator::getDeviceStats(0).allocated_bytes[0].current;
    if (chunked) {
      TokenStats t = chunked_token_stats(h, w, ids, mask, s, 1024, true);
      lp = t.logp_BT, ent = t.entropy_BT;
    } else {
      at::Tensor logits = model::sampling_logits(at::linear(h, w).to(at::kFloat), s);
      lp = token_logprobs(logits, ids) * mask;
      ent = rl::token_entropy(shifted_logits(logits)) * mask;
    }
    ((lp * r).sum() + (ent * r).sum()).backward();
    gh = h.grad(), gw = w.grad();
    return peak_bytes() - base;
  };
  at::Tensor lp_f, ent_f, gh_f, gw_f, lp_c, ent_c, gh_c, gw_c;
  const int64_t full = run(false, lp_f, ent_f, gh_f, gw_f);
  const int64_t chunked = run(true, lp_c, ent_c, gh_c, gw_c);
  std::printf("peak over the inputs: full logits %.2f GB, chunked (1024) %.2f GB; [B,T,V] f32 = %.2f GB\n",
              full / 1e9, chunked / 1e9, B * T * V * 4 / 1e9);
  EXPECT_LT(rel_err(lp_c, lp_f), 1e-5);
  EXPECT_LT(rel_err(ent_c, ent_f), 1e-4);
  EXPECT_LT(rel_err(gh_c, gh_f), 2e-2);  // bf16 gradients: products rounded in another order
  EXPECT_LT(rel_err(gw_c, gw_f), 2e-2);
  EXPECT_LT(chunked, full / 4) << "the chunked pass must not hold [B,T,V] logits";
}

// The kernels on their own, float32 logits with a vocabulary that is not a multiple of the
// 16-byte access (the scalar path), against log_softmax and autograd in float64.
TEST(TokenStatsKernels, Float32OddVocabularyMatchesAutograd) {
  const int64_t N = 37, V = 1001;
  const auto f32 = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA);
  at::manual_seed(3);
  at::Tensor z = at::randn({N, V}, f32) * 3, t = at::randint(V, {N}, f32.dtype(at::kLong));
  at::Tensor g = at::randn({N}, f32), ge = at::randn({N}, f32);
  const double inv_t = 1 / 0.7;
  at::Tensor logp = at::empty({N}, f32), ent = at::empty({N}, f32), lse = at::empty({N}, f32);
  model::cuda::token_stats_forward(z, t, inv_t, logp, ent, lse);
  at::Tensor zr = z.to(at::kDouble).requires_grad_(true);
  at::Tensor lp_all = at::log_softmax(zr * inv_t, -1);
  at::Tensor lp_ref = lp_all.gather(1, t.unsqueeze(1)).squeeze(1), ent_ref = -(lp_all.exp() * lp_all).sum(-1);
  ((lp_ref * g.to(at::kDouble)).sum() + (ent_ref * ge.to(at::kDouble)).sum()).backward();
  EXPECT_LT(rel_err(logp, lp_ref), 1e-5);
  EXPECT_LT(rel_err(ent, ent_ref), 1e-5);
  EXPECT_LT(rel_err(lse, at::logsumexp(zr * inv_t, -1)), 1e-6);
  at::Tensor dz = z.clone();
  model::cuda::token_stats_backward(dz, t, lse, g, ge, ent, inv_t);
  EXPECT_LT(rel_err(dz, zr.grad()), 1e-5);
  EXPECT_THROW(model::cuda::token_stats_forward(z.to(at::kHalf), t, 1.0, logp, ent, lse), Error);
}

}  // namespace
}  // namespace moerl::train
