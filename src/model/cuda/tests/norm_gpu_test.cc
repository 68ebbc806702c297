// model::rms_norm on the GPU (libtorch's fused kernel where it has one) against the float64
// composite on the host, values and gradients, for the shapes a decoder layer gives it: the
// hidden rows, and per-head q/k rows that are views of a fused qkv projection.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <functional>

#include "model/common/layers.h"
#include "model/cuda/tests/gpu_test_util.h"

namespace moerl::model {
namespace {

using ::moerl::testing::rel_err;

struct NormRun {
  at::Tensor y, dx, dw;
};

// y = rms_norm(x, w) and the gradients of sum(y * dy); x may be a strided view of `base`.
NormRun run_norm(const at::Tensor& base, const std::function<at::Tensor(const at::Tensor&)>& view,
                 const at::Tensor& w_in, const at::Tensor& dy) {
  at::Tensor b = base.detach().requires_grad_(true), w = w_in.detach().requires_grad_(true);
  at::Tensor y = rms_norm(view(b), w, 1e-6);
  (y.to(at::kDouble) * dy.to(y.device(), at::kDouble)).sum().backward();
  return {y.detach(), b.grad(), w.grad()};
}

void expect_matches_float64(const at::Tensor& base_bf16, const std::function<at::Tensor(const at::Tensor&)>& view,
                            int64_t width) {
  at::Tensor w = (1 + 0.3 * at::randn({width}, at::kDouble)).to(at::kBFloat16);
  at::Tensor dy = at::randn(view(base_bf16).sizes(), at::kDouble);
  NormRun gpu = run_norm(base_bf16.cuda(), view, w.cuda(), dy);
  NormRun ref = run_norm(base_bf16.to(at::kDouble), view, w.to(at::kDouble), dy);  // same inputs, float64 math
  EXPECT_LT(rel_err(gpu.y, ref.y), 8e-3);
  EXPECT_LT(rel_err(gpu.dx, ref.dx), 1.5e-2);
  EXPECT_LT(rel_err(gpu.dw, ref.dw), 1.5e-2);
}

TEST(RmsNormGpu, HiddenRowsMatchFloat64ValuesAndGradients) {
  at::manual_seed(3);
  at::Tensor x = (3 * at::randn({4, 33, 2048}, at::kDouble)).to(at::kBFloat16);
  expect_matches_float64(x, [](const at::Tensor& t) { return t; }, 2048);
}

TEST(RmsNormGpu, PerHeadViewsOfAFusedProjectionMatchFloat64) {
  at::manual_seed(4);
  // [B, T, (Hq + 2 Hkv) * D] as the fused qkv product gives it; q is a strided view of it.
  const int64_t B = 3, T = 9, Hq = 8, Hkv = 2, D = 128;
  at::Tensor qkv = at::randn({B, T, (Hq + 2 * Hkv) * D}, at::kDouble).to(at::kBFloat16);
  expect_matches_float64(qkv, [&](const at::Tensor& t) { return t.narrow(-1, 0, Hq * D).view({B, T, Hq, D}); }, D);
  expect_matches_float64(
      qkv, [&](const at::Tensor& t) { return t.narrow(-1, Hq * D, Hkv * D).view({B, T, Hkv, D}); }, D);
}

}  // namespace
}  // namespace moerl::model
