// CUDA EP kernels against the CPU reference (ep/kernels/ and at:: ops in float64) on
// random inputs; outputs are poisoned first so unwritten rows fail.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <vector>

#include "base/error.h"
#include "ep/cuda/ops.h"
#include "ep/kernels/layout.h"
#include "ep/kernels/rows.h"

namespace moerl::ep {
namespace {

at::Tensor cuda_randn(std::vector<int64_t> shape, at::ScalarType t) {
  return at::randn(shape, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA)).to(t);
}

double rel_err(const at::Tensor& out, const at::Tensor& ref) {
  at::Tensor o = out.to(at::kCPU, at::kDouble), r = ref.to(at::kCPU, at::kDouble);
  EXPECT_FALSE(o.isnan().any().item<bool>());
  return (o - r).norm().item<double>() / std::max(r.norm().item<double>(), 1e-30);
}

// Random top-k ids: distinct experts per token, some slots -1.
at::Tensor random_topk(int64_t T, int64_t K, int64_t E, bool drops) {
  at::Tensor idx = at::rand({T, E}).argsort(int64_t{1}, false).narrow(1, 0, K).contiguous();
  if (drops) idx.masked_fill_(at::rand({T, K}).lt(0.1), -1);
  return idx;
}

TEST(EpCudaKernels, LayoutMatchesCpu) {
  for (int R : {1, 2, 4, 8}) {
    const int64_t T = 3001, K = 8, E = 128;
    at::Tensor idx = random_topk(T, K, E, true);
    std::vector<int64_t> per_rank(R), per_expert(E);
    std::vector<char> in_rank(T * R);
    ASSERT_EQ(kernels::compute_layout(idx.data_ptr<int64_t>(), T, K, E, R, per_rank.data(), per_expert.data(),
                                      reinterpret_cast<bool*>(in_rank.data())),
              "");
    Layout g = cuda::compute_layout(idx.cuda(), E, R);
    at::Tensor pr = g.num_tokens_per_rank.cpu(), pe = g.num_tokens_per_expert.cpu(), ir = g.is_token_in_rank.cpu();
    for (int r = 0; r < R; ++r) EXPECT_EQ(pr.data_ptr<int64_t>()[r], per_rank[r]) << "rank " << r;
    for (int64_t e = 0; e < E; ++e) EXPECT_EQ(pe.data_ptr<int64_t>()[e], per_expert[e]) << "expert " << e;
    for (int64_t i = 0; i < T * R; ++i) ASSERT_EQ(ir.data_ptr<bool>()[i], in_rank[i] != 0) << "entry " << i;
  }
}

TEST(EpCudaKernels, LayoutRejectsBadIds) {
  at::Tensor idx = random_topk(64, 4, 16, false);
  idx[5][2] = 16;
  EXPECT_THROW(cuda::compute_layout(idx.cuda(), 16, 2), Error);
}

TEST(EpCudaKernels, PackUnpackMatchCpu) {
  for (auto dt : {at::kBFloat16, at::kFloat}) {
    for (int64_t H : {2048, 7168, 100, 3}) {  // vector and element-wise paths
      const int64_t R = 777, n = 1500;
      at::Tensor src = cuda_randn({R, H}, dt);
      at::Tensor rows = at::randint(0, R, {n}, at::kLong);
      at::Tensor src_cpu = src.cpu();
      at::Tensor ref = at::empty({n, H}, src_cpu.options());
      kernels::gather_rows(src_cpu.data_ptr(), H * src.element_size(), rows.data_ptr<int64_t>(), n, ref.data_ptr());
      at::Tensor out = cuda::pack_rows(src, rows.cuda());
      EXPECT_TRUE(at::equal(out.cpu(), ref)) << "pack H=" << H;

      // unpack: a permutation, so every dst row is written exactly once.
      at::Tensor perm = at::randperm(R, at::kLong);
      at::Tensor dst = at::full({R, H}, std::nan(""), src.options());
      cuda::unpack_rows(src, perm.cuda(), dst);
      at::Tensor dref = at::empty({R, H}, src_cpu.options());
      kernels::scatter_rows(src_cpu.data_ptr(), H * src.element_size(), perm.data_ptr<int64_t>(), R, dref.data_ptr());
      EXPECT_TRUE(at::equal(dst.cpu(), dref)) << "unpack H=" << H;
    }
  }
}

TEST(EpCudaKernels, AccumulateMatchesCpu) {
  for (auto dt : {at::kBFloat16, at::kFloat}) {
    const int64_t T = 300, H = 520, n = 2000;
    at::Tensor rows = cuda_randn({n, H}, dt);
    at::Tensor tok = at::randint(0, T, {n}, at::kLong);
    at::Tensor ref = at::randn({T, H});
    at::Tensor acc = ref.cuda();
    at::Tensor rows_cpu = rows.cpu();
    kernels::accumulate_rows(rows_cpu.data_ptr(), dt == at::kFloat ? kernels::DType::kFloat32 : kernels::DType::kBFloat16,
                             H, tok.data_ptr<int64_t>(), n, ref.data_ptr<float>());
    cuda::accumulate_rows(rows, tok.cuda(), acc);
    EXPECT_LT(rel_err(acc, ref), 1e-6);
  }
}

TEST(EpCudaKernels, WeightedCombineAndGradientsMatchReference) {
  for (auto dt : {at::kBFloat16, at::kFloat}) {
    for (int64_t H : {2048, 72, 5}) {
      const int64_t T = 513, K = 8, M = T * K;
      at::Tensor y = cuda_randn({M, H}, dt);
      at::Tensor pos = at::randperm(M, at::kLong).view({T, K});
      pos.masked_fill_(at::rand({T, K}).lt(0.1), -1);
      at::Tensor w = at::rand({T, K});
      at::Tensor out = cuda::weighted_combine(y, pos.cuda(), w.cuda());
      // reference in float64
      at::Tensor yd = y.cpu().to(at::kDouble);
      at::Tensor g = yd.index_select(0, pos.clamp_min(0).view(-1)).view({T, K, H});
      at::Tensor wd = w.to(at::kDouble).masked_fill(pos.lt(0), 0.0);
      at::Tensor ref = (g * wd.unsqueeze(-1)).sum(1);
      EXPECT_LT(rel_err(out, ref), dt == at::kFloat ? 1e-6 : 8e-3) << "H=" << H;
      // unweighted
      at::Tensor out1 = cuda::weighted_combine(y, pos.cuda(), at::Tensor());
      at::Tensor ref1 = (g * pos.ge(0).to(at::kDouble).unsqueeze(-1)).sum(1);
      EXPECT_LT(rel_err(out1, ref1), dt == at::kFloat ? 1e-6 : 8e-3);
      // row dots: <a[t], y[pos[t,k]]>
      at::Tensor a = cuda_randn({T, H}, dt);
      at::Tensor dots = cuda::row_dots(a, y, pos.cuda());
      at::Tensor dref = (g * a.cpu().to(at::kDouble).unsqueeze(1)).sum(-1).masked_fill(pos.lt(0), 0.0);
      EXPECT_LT(rel_err(dots, dref), 1e-5);
      // scaled pack
      at::Tensor rows = at::randint(0, M, {700}, at::kLong);
      at::Tensor scale = at::randn({700});
      at::Tensor sp = cuda::pack_rows_scaled(y, rows.cuda(), scale.cuda());
      at::Tensor sref = yd.index_select(0, rows) * scale.to(at::kDouble).unsqueeze(1);
      EXPECT_LT(rel_err(sp, sref), dt == at::kFloat ? 1e-6 : 8e-3);
    }
  }
}

TEST(EpCudaKernels, RejectsCpuTensors) {
  at::Tensor x = at::randn({4, 8});
  EXPECT_THROW(cuda::pack_rows(x, at::zeros({2}, at::kLong)), Error);
}

}  // namespace
}  // namespace moerl::ep
