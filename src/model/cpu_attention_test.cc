// The fused CPU attention core against the eager ATen math it replaces (matmul, masked_fill
// with the lowest value, softmax, matmul): outputs and gradients of q, k and v, with padding,
// a fully masked (pad) query row, grouped heads, a key length longer than the queries, and a
// value width different from the key width (MLA).
#include <gtest/gtest.h>

#include <functional>
#include <limits>

#include "model/common/attention.h"
#include "model/common/cpu_attention.h"

namespace moerl::model {
namespace {

// The eager reference, [B,T,Hq,D] like cpu_attention.
at::Tensor eager(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& allowed, double scale) {
  const int64_t B = q.size(0), Hq = q.size(1), T = q.size(2), D = q.size(3), Hkv = k.size(1), S = k.size(2);
  const int64_t G = Hq / Hkv;
  at::Tensor scores = at::matmul(q.reshape({B, Hkv, G * T, D}), k.transpose(2, 3)) * scale;
  scores = scores.view({B, Hkv, G, T, S});
  const double lowest = q.scalar_type() == at::kDouble ? std::numeric_limits<double>::lowest()
                                                      : std::numeric_limits<float>::lowest();
  scores = scores.masked_fill(allowed.unsqueeze(1).logical_not(), lowest);
  at::Tensor probs = at::softmax(scores, -1);
  at::Tensor out = at::matmul(probs.view({B, Hkv, G * T, S}), v);
  return out.view({B, Hq, T, v.size(3)}).transpose(1, 2);
}

using Core = std::function<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, double)>;

// `candidate` (default: the fused op) against the eager reference.
void compare(at::ScalarType dtype, double tol, int64_t Dv = 8, int64_t Hkv = 2, Core candidate = cpu_attention) {
  const int64_t B = 3, Hq = 4, T = 5, S = 7, D = 8;
  at::manual_seed(11);
  auto opts = at::TensorOptions().dtype(dtype);
  at::Tensor q = at::randn({B, Hq, T, D}, opts), k = at::randn({B, Hkv, S, D}, opts), v = at::randn({B, Hkv, S, Dv}, opts);
  // Causal over the last T of S slots, key padding per row, and row 2's query 0 sees nothing.
  at::Tensor causal = at::arange(S).unsqueeze(0).le(at::arange(S - T, S).unsqueeze(1));   // [T,S]
  at::Tensor key_ok = at::ones({B, S}, at::kBool);
  key_ok[1].narrow(0, 0, 2).fill_(false);
  at::Tensor allowed = (causal.unsqueeze(0) & key_ok.unsqueeze(1)).unsqueeze(1).clone();  // [B,1,T,S]
  allowed[2][0][0].fill_(false);
  at::Tensor go = at::randn({B, T, Hq, Dv}, opts);
  const double scale = 0.37;

  auto run = [&](bool fused) {
    at::Tensor qq = q.clone().set_requires_grad(true), kk = k.clone().set_requires_grad(true),
               vv = v.clone().set_requires_grad(true);
    at::Tensor out = fused ? candidate(qq, kk, vv, allowed, scale) : eager(qq, kk, vv, allowed, scale);
    out.backward(go);
    return std::vector<at::Tensor>{out.detach(), qq.grad(), kk.grad(), vv.grad()};
  };
  ASSERT_TRUE(cpu_attention_applies(q, k));
  std::vector<at::Tensor> f = run(true), e = run(false);
  const char* names[] = {"out", "dq", "dk", "dv"};
  for (size_t i = 0; i < f.size(); ++i) {
    ASSERT_EQ(f[i].sizes(), e[i].sizes()) << names[i];
    EXPECT_LT((f[i] - e[i]).abs().max().item<double>(), tol) << names[i];
    EXPECT_GT(f[i].abs().max().item<double>(), 0.01) << names[i] << " should not be trivially zero";
  }
  // The pad query (row 2, query 0) attends uniformly and gives q no gradient.
  EXPECT_EQ(f[1][2].select(1, 0).abs().max().item<double>(), 0.0);
  at::Tensor uniform = v[2].mean(1);  // [Hkv,D]
  EXPECT_LT((f[0][2][0][0] - uniform[0]).abs().max().item<double>(), tol);
}

TEST(CpuAttention, MatchesEagerMathFloat64) { compare(at::kDouble, 1e-12); }
TEST(CpuAttention, MatchesEagerMathFloat32) { compare(at::kFloat, 2e-5); }
// MLA: values narrower (expanded order) or wider (absorbed order, one kv head) than keys.
TEST(CpuAttention, ValueWidthMayDifferFromKeyWidth) {
  compare(at::kDouble, 1e-12, /*Dv=*/5);
  compare(at::kDouble, 1e-12, /*Dv=*/13, /*Hkv=*/1);
}

// The non-fused path (GPUs, bf16) in blocks of queries: 5 queries as 2 + 2 + 1, and 1 + 1 + ...
TEST(AttentionBlocks, QueryBlocksEqualOnePass) {
  for (int64_t block : {1, 2, 5}) {
    compare(at::kDouble, 1e-12, 8, 2, [block](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                              const at::Tensor& allowed, double scale) {
      return attention_in_blocks(q, k, v, allowed, scale, block);
    });
  }
}

TEST(AttentionBlocks, BlockSizeKeepsTheScoresWithinTheBudget) {
  // DeepSeek-V3 prefill: batch 128, 128 heads, 512 queries over 512 slots.
  const int64_t block = attention_query_block(128, 128, 512, 512);
  EXPECT_LE(128 * 128 * block * 512, kAttentionScoreBudget);
  EXPECT_GT(128 * 128 * (block + 1) * 512, kAttentionScoreBudget);
  EXPECT_EQ(attention_query_block(1, 4, 1, 10), 1);        // decode: one query
  EXPECT_EQ(attention_query_block(2, 4, 16, 16), 16);      // small: one pass
  EXPECT_EQ(attention_query_block(1 << 20, 1 << 10, 4, 1 << 10), 1);  // never below one query
}

TEST(CpuAttention, AppliesOnlyToCpuFloatTypes) {
  EXPECT_TRUE(cpu_attention_applies(at::zeros({1, 1, 1, 2}), at::zeros({1, 1, 1, 2})));
  EXPECT_FALSE(cpu_attention_applies(at::zeros({1, 1, 1, 2}, at::kBFloat16), at::zeros({1, 1, 1, 2}, at::kBFloat16)));
}

}  // namespace
}  // namespace moerl::model
