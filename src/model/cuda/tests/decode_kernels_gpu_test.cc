// The graph decode with the decode step's own kernels (model/cuda/decode_kernels.h) against
// the model's forward, on a small model of sizes the kernels take (head_dim 128, expert
// widths multiples of 64): greedy tokens by teacher forcing, as
// ModelGpuArch.FastGenerateRunsTheGraphAndAgreesWithForward does for the at:: ops.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <vector>

#include "model/cuda/decode_attention.h"
#include "model/cuda/decode_kernels.h"
#include "model/cuda/expert_gemm.h"
#include "model/cuda/fast_generate.h"
#include "model/cuda/moe_gpu.h"
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
  cuda::set_decode_kernels({.experts = true, .attention = true});
  const std::vector<std::vector<int64_t>> prompts = {{1, 7, 9, 11, 13}, {1, 4}, {1, 30, 31}};
  GenerateConfig g;
  g.max_new_tokens = 10;
  g.sampling.greedy = true;
  g.record_routing = true;
  cuda::FastGenerateStats st;
  auto got = cuda::fast_generate(m, prompts, g, /*use_graph=*/true, &st);
  cuda::set_decode_kernels(was);
  EXPECT_TRUE(st.used_graph);
  for (size_t b = 0; b < got.size(); ++b) {
    ASSERT_EQ(got[b].tokens.size(), static_cast<size_t>(g.max_new_tokens));
    std::vector<int64_t> seq = prompts[b];
    const int64_t P = static_cast<int64_t>(seq.size());
    seq.insert(seq.end(), got[b].tokens.begin(), got[b].tokens.end());
    at::Tensor logp;
    {
      at::NoGradGuard ng;  // the forward: SDPA attention, grouped_mm experts under the decode's routing
      at::Tensor ids = at::tensor(seq, at::kLong).view({1, -1}).to(m.device());
      const int64_t L = m.num_moe_layers(), K = cfg.num_experts_per_tok, fed = ids.size(1) - 1;
      at::Tensor replay = at::full({1, ids.size(1), L, K}, -1, at::kLong);
      std::vector<int64_t> rec(got[b].routed_experts.begin(), got[b].routed_experts.end());
      replay.view({-1}).narrow(0, 0, fed * L * K).copy_(at::tensor(rec, at::kLong));
      logp = m.forward({.input_ids = ids, .routing_replay = replay.to(m.device())})
                 .logits_BTV[0]
                 .to(at::kFloat)
                 .log_softmax(-1)
                 .cpu();
    }
    for (int64_t t = 0; t < g.max_new_tokens; ++t) {
      at::Tensor row = logp[P - 1 + t];
      const float chosen = row[got[b].tokens[t]].item<float>(), best = row.max().item<float>();
      EXPECT_GE(chosen, best - (0.05f + 0.02f * std::abs(best))) << "row " << b << " step " << t;
      EXPECT_NEAR(got[b].logprobs[t], chosen, 0.15 + 0.05 * std::abs(chosen)) << "row " << b << " step " << t;
    }
  }
}

}  // namespace
}  // namespace moerl::model
