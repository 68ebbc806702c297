// The fused attention of several query positions (model/cuda/attention_gpu.h) against
// attention_core's blocks in float32: GQA, left padding (pad queries with no allowed slot attend
// uniformly), a prefill after cached slots (S > T), forward and the gradients of q, k and v.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "model/cuda/tests/gpu_test_util.h"
#include "model/common/attention.h"
#include "model/cuda/attention_gpu.h"

namespace moerl::model {
namespace {

using ::moerl::testing::rel_err;

struct Grads {
  at::Tensor out, dq, dk, dv;
};

Grads run(bool fused, const at::Tensor& q0, const at::Tensor& k0, const at::Tensor& v0, const at::Tensor& allowed,
          const at::Tensor& dy, at::ScalarType dt) {
  auto leaf = [dt](const at::Tensor& x) { return x.to(dt).clone().requires_grad_(true); };
  at::Tensor q = leaf(q0), k = leaf(k0), v = leaf(v0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  at::Tensor out = fused ? cuda::fused_attention(q, k, v, allowed, scale)
                         : attention_in_blocks(q, k, v, allowed, scale, q.size(2));
  EXPECT_TRUE(out.defined());
  (out.to(at::kFloat) * dy).sum().backward();
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

TEST(AttentionGpu, FusedMatchesTheBlocksUnderPaddingGqaAndCachedSlots) {
  const int64_t B = 3, Hq = 8, Hkv = 2, D = 64;
  const auto f32 = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA);
  at::manual_seed(11);
  for (const int64_t T : {int64_t{40}, int64_t{16}}) {
    const int64_t S = T == 40 ? 40 : 48;  // 48: a prefill of 16 positions after 32 cached slots
    at::Tensor q = at::randn({B, Hq, T, D}, f32), k = at::randn({B, Hkv, S, D}, f32), v = at::randn({B, Hkv, S, D}, f32);
    // Query t sits at slot S - T + t; row b is left-padded by 5 * b slots.
    at::Tensor slot = at::arange(S, f32.dtype(at::kLong)), qpos = at::arange(S - T, S, f32.dtype(at::kLong));
    at::Tensor allowed = slot.view({1, 1, 1, S}).le(qpos.view({1, 1, T, 1})).expand({B, 1, T, S}).clone();
    for (int64_t b = 0; b < B; ++b) allowed[b].narrow(-1, 0, 5 * b).fill_(false);
    if (T == 40) allowed[2][0].narrow(0, 0, 3).fill_(false);  // pad queries: no allowed slot at all
    at::Tensor dy = at::randn({B, T, Hq, D}, f32);
    const Grads ref = run(false, q, k, v, allowed, dy, at::kFloat);
    const Grads got = run(true, q, k, v, allowed, dy, at::kBFloat16);
    const Grads blocks = run(false, q, k, v, allowed, dy, at::kBFloat16);
    EXPECT_LT(rel_err(got.out, ref.out), 1e-2) << "T=" << T;
    EXPECT_LT(rel_err(got.dq, ref.dq), 2e-2) << "T=" << T;
    EXPECT_LT(rel_err(got.dk, ref.dk), 2e-2) << "T=" << T;
    EXPECT_LT(rel_err(got.dv, ref.dv), 2e-2) << "T=" << T;
    // No worse than the bf16 blocks it replaces (their error, with 50% slack).
    EXPECT_LT(rel_err(got.out, ref.out), 1.5 * rel_err(blocks.out, ref.out) + 1e-3) << "T=" << T;
  }
  // Not its dtype: not handled, the blocks run.
  at::Tensor q = at::randn({1, 2, 4, 8}, f32);
  EXPECT_FALSE(cuda::fused_attention(q, q, q, at::ones({1, 1, 4, 4}, f32.dtype(at::kBool)), 1.0).defined());
}

}  // namespace
}  // namespace moerl::model
