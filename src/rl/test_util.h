// Helpers shared by the rl/ tests: small double tensors from literals, element-wise checks.
#pragma once

#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace moerl::rl::testing {

inline at::Tensor t(const std::vector<double>& v, std::vector<int64_t> shape = {}) {
  at::Tensor x = at::tensor(at::ArrayRef<double>(v), at::TensorOptions().dtype(at::kDouble));
  if (shape.empty()) return x;
  return x.reshape(shape);
}

inline void expect_all_near(const at::Tensor& got, const std::vector<double>& want, double tol = 1e-6) {
  at::Tensor g = got.detach().to(at::kDouble).contiguous().reshape({-1});
  ASSERT_EQ(g.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(g[i].item<double>(), want[i], tol) << "element " << i;
  }
}

inline void expect_tensors_near(const at::Tensor& a, const at::Tensor& b, double tol = 1e-10) {
  ASSERT_EQ(a.sizes(), b.sizes());
  double diff = (a.detach().to(at::kDouble) - b.detach().to(at::kDouble)).abs().max().item<double>();
  EXPECT_LT(diff, tol);
}

}  // namespace moerl::rl::testing
