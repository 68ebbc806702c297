// Helpers shared by the GPU tests.
#pragma once

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <string>

#include "model/cuda/moe_gpu.h"
#include "model/test_util.h"

namespace moerl::testing {

// ||out - ref|| / ||ref|| in float64 on the host; a NaN in `out` fails the calling test.
inline double rel_err(const at::Tensor& out, const at::Tensor& ref) {
  at::Tensor o = out.to(at::kCPU, at::kDouble), r = ref.to(at::kCPU, at::kDouble);
  EXPECT_FALSE(o.isnan().any().item<bool>());
  return (o - r).norm().item<double>() / std::max(r.norm().item<double>(), 1e-30);
}

}  // namespace moerl::testing

namespace moerl::model::testing {

// A bf16 CUDA model of tiny_config(arch) with a sharpened head, so greedy choices are not
// near-ties that bf16 kernels of other batch shapes could flip.
inline Model sharp_cuda(const std::string& arch, uint64_t seed) {
  cuda::install_cuda_experts();
  Model m = init_random(tiny_config(arch), seed, {at::kBFloat16, at::kCUDA, nullptr});
  at::NoGradGuard ng;
  m.params().at("lm_head.weight").mul_(40.0);
  return m;
}

}  // namespace moerl::model::testing
