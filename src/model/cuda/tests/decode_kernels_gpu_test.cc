// The graph decode with the decode step's own kernels (model/cuda/decode_kernels.h) against
// the model's forward, on a small model of sizes the kernels take (head_dim 128, expert
// widths multiples of 64): greedy tokens by teacher forcing, as
// ModelGpuArch.FastGenerateRunsTheGraphAndAgreesWithForward does for the at:: ops
// (testing::expect_forward_agrees).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <vector>

#include "model/cuda/decode_attention.h"
#include "model/cuda/decode_kernels.h"
#include "model/cuda/expert_gemm.h"
#include "model/cuda/fast_generate.h"
#include "model/cuda/moe_gpu.h"
#include "model/cuda/tests/gpu_test_util.h"
#include "model/model.h"
#include "model/test_util.h"

namespace moerl::model {
namespace {

io::HfConfig kernel_sized_qwen3() {
  io::HfConfig c = testing::tiny_qwen3(/*all_moe=*/true);
  c.hidden_size = 256;
  c.moe_intermediate_size = 128;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 2;
  c.head_dim = 128;
  return c;
}

TEST(DecodeKernelsGpu, GraphDecodeWithTheKernelsAgreesWithForward) {
  const io::HfConfig cfg = kernel_sized_qwen3();
  ASSERT_TRUE(cuda::decode_attention_fits(cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim));
  ASSERT_TRUE(cuda::expert_gemm_fits(cfg.moe_intermediate_size, cfg.hidden_size, true) &&
              cuda::expert_gemm_fits(cfg.hidden_size, cfg.moe_intermediate_size, false));
  cuda::install_cuda_experts();
  Model m = init_random(cfg, 31, {at::kBFloat16, at::kCUDA, nullptr});
  {
    at::NoGradGuard ng;
    m.params().at("lm_head.weight").mul_(8.0);  // decisive greedy choices
  }
  const cuda::DecodeKernels was = cuda::decode_kernels();
  cuda::set_decode_kernels({.experts = true, .attention = true, .sampling = true});
  const std::vector<std::vector<int64_t>> prompts = {{1, 7, 9, 11, 13}, {1, 4}, {1, 30, 31}};
  GenerateConfig g;
  g.max_new_tokens = 10;
  g.sampling.greedy = true;
  g.record_routing = true;
  cuda::FastGenerateStats st;
  auto got = cuda::fast_generate(m, prompts, g, /*use_graph=*/true, &st);
  cuda::set_decode_kernels(was);
  EXPECT_TRUE(st.used_graph);
  testing::expect_forward_agrees(m, prompts, got, g.max_new_tokens);
}

}  // namespace
}  // namespace moerl::model
