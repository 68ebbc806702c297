// decode_attention against a float32 reference (masked softmax over the cache, GQA heads),
// across chunk boundaries, odd cache lengths, GQA ratios, and a row with nothing to attend.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "model/cuda/decode_attention.h"
#include "model/cuda/tests/gpu_test_util.h"

namespace moerl::model {
namespace {

using ::moerl::testing::rel_err;

at::Tensor reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& valid, int64_t G,
                     float scale) {
  const int64_t B = q.size(0), Hkv = k.size(1), D = q.size(2);
  at::Tensor qf = q.to(at::kFloat).view({B, Hkv, G, D});
  at::Tensor s = at::matmul(qf, k.to(at::kFloat).transpose(2, 3)) * scale;  // [B,Hkv,G,S]
  s = s.masked_fill(valid.view({B, 1, 1, -1}).logical_not(), -std::numeric_limits<float>::infinity());
  at::Tensor p = at::softmax(s, -1).nan_to_num(0.0);  // an all-masked row: zeros
  return at::matmul(p, v.to(at::kFloat)).reshape({B, Hkv * G, D});
}

TEST(DecodeAttentionGpu, MatchesAFloat32Reference) {
  at::manual_seed(11);
  auto bf = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  const int64_t D = 128;
  for (auto [Hq, Hkv, S] : {std::tuple<int64_t, int64_t, int64_t>{32, 4, 600}, {32, 4, 5}, {8, 2, 256}, {4, 4, 513},
                            {16, 2, 1537}}) {
    const int64_t B = 3, G = Hq / Hkv;
    ASSERT_TRUE(cuda::decode_attention_fits(Hq, Hkv, D));
    at::Tensor q = at::randn({B, Hq, D}, bf), k = at::randn({B, Hkv, S, D}, bf), v = at::randn({B, Hkv, S, D}, bf);
    at::Tensor valid = at::rand({B, S}, at::TensorOptions().device(at::kCUDA)).lt(0.7);
    valid[2].fill_(false);  // nothing to attend: zeros
    at::Tensor out = at::empty({B, Hq, D}, bf);
    const float scale = 1.f / std::sqrt(static_cast<float>(D));
    ASSERT_EQ(cuda::decode_attention(q.data_ptr(), k.data_ptr(), v.data_ptr(), valid.data_ptr<bool>(), nullptr, B, Hq, Hkv, S,
                                     D, scale, out.data_ptr(), c10::cuda::getCurrentCUDAStream().stream()),
              cudaSuccess);
    const at::Tensor ref = reference(q, k, v, valid, G, scale);
    EXPECT_LT(rel_err(out.narrow(0, 0, 2), ref.narrow(0, 0, 2)), 1e-2) << "Hq=" << Hq << " Hkv=" << Hkv << " S=" << S;
    EXPECT_EQ(out[2].abs().max().item<float>(), 0.f) << "S=" << S;
  }
}

// With each row's last slot given, positions past it are not read: there the keys and values
// are NaN (a cache's unwritten tail may hold anything), and the output still equals the
// reference over the slots up to it, across chunk boundaries; a row at slot 0 sees one slot.
TEST(DecodeAttentionGpu, ReadsNoPositionPastTheRowsLastSlot) {
  at::manual_seed(12);
  auto bf = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  const int64_t B = 4, Hq = 32, Hkv = 4, S = 1100, D = 128;
  const std::vector<int64_t> last = {300, 1099, 0, 700};
  at::Tensor q = at::randn({B, Hq, D}, bf), k = at::randn({B, Hkv, S, D}, bf), v = at::randn({B, Hkv, S, D}, bf);
  at::Tensor valid = at::rand({B, S}, at::TensorOptions().device(at::kCUDA)).lt(0.7);
  at::Tensor k_tail = k.clone(), v_tail = v.clone();
  for (int64_t b = 0; b < B; ++b) {
    valid[b][last[b]] = true;
    if (last[b] + 1 < S) {
      valid[b].narrow(0, last[b] + 1, S - last[b] - 1).fill_(false);
      k_tail[b].narrow(1, last[b] + 1, S - last[b] - 1).fill_(std::numeric_limits<float>::quiet_NaN());
      v_tail[b].narrow(1, last[b] + 1, S - last[b] - 1).fill_(std::numeric_limits<float>::quiet_NaN());
    }
  }
  const at::Tensor last_B = at::tensor(last, at::kLong).to(at::kCUDA);
  at::Tensor out = at::empty({B, Hq, D}, bf);
  const float scale = 1.f / std::sqrt(static_cast<float>(D));
  ASSERT_EQ(cuda::decode_attention(q.data_ptr(), k_tail.data_ptr(), v_tail.data_ptr(), valid.data_ptr<bool>(),
                                   last_B.data_ptr<int64_t>(), B, Hq, Hkv, S, D, scale, out.data_ptr(),
                                   c10::cuda::getCurrentCUDAStream().stream()),
            cudaSuccess);
  EXPECT_LT(rel_err(out, reference(q, k, v, valid, Hq / Hkv, scale)), 1e-2);
}

TEST(DecodeAttentionGpu, RefusesShapesItDoesNotTake) {
  EXPECT_FALSE(cuda::decode_attention_fits(32, 4, 64));   // head_dim 128 only
  EXPECT_FALSE(cuda::decode_attention_fits(64, 4, 128));  // 16 query heads per KV head
  EXPECT_FALSE(cuda::decode_attention_fits(30, 4, 128));  // not a whole ratio
  EXPECT_EQ(cuda::decode_attention(nullptr, nullptr, nullptr, nullptr, nullptr, 1, 64, 4, 8, 128, 1.f, nullptr, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace moerl::model
