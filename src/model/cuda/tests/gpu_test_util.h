// Helpers shared by the GPU tests.
#pragma once

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>

namespace moerl::testing {

// ||out - ref|| / ||ref|| in float64 on the host; a NaN in `out` fails the calling test.
inline double rel_err(const at::Tensor& out, const at::Tensor& ref) {
  at::Tensor o = out.to(at::kCPU, at::kDouble), r = ref.to(at::kCPU, at::kDouble);
  EXPECT_FALSE(o.isnan().any().item<bool>());
  return (o - r).norm().item<double>() / std::max(r.norm().item<double>(), 1e-30);
}

}  // namespace moerl::testing
