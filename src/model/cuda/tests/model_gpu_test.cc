// The whole model on the GPU against the CPU path: same seed, same parameters; logits of a
// float32 CUDA model (generic path) and of a bf16 CUDA model (grouped-GEMM experts hook).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "model/cuda/moe_gpu.h"
#include "model/generate.h"
#include "model/model.h"
#include "model/test_util.h"

namespace moerl::model {
namespace {

double rel_err(const at::Tensor& out, const at::Tensor& ref) {
  at::Tensor o = out.to(at::kCPU, at::kDouble), r = ref.to(at::kCPU, at::kDouble);
  EXPECT_FALSE(o.isnan().any().item<bool>());
  return (o - r).norm().item<double>() / std::max(r.norm().item<double>(), 1e-30);
}

TEST(ModelGpu, LogitsMatchCpu) {
  cuda::install_cuda_experts();
  io::HfConfig cfg = testing::tiny_qwen3(/*all_moe=*/true);
  Model cpu = init_random(cfg, 11, {at::kFloat, at::kCPU, nullptr});
  at::Tensor ids = at::randint(3, cfg.vocab_size, {3, 17}, at::kLong);
  at::Tensor mask = at::ones({3, 17}, at::kLong);
  mask[0].narrow(0, 0, 4).fill_(0);  // left padding on one row
  ForwardOutput ref = cpu.forward({ids, mask});
  at::Tensor keep = mask.to(at::kBool);

  Model f32 = init_random(cfg, 11, {at::kFloat, at::kCUDA, nullptr});
  ForwardOutput g32 = f32.forward({ids.cuda(), mask.cuda()});
  EXPECT_LT(rel_err(g32.logits_BTV.cpu().index({keep}), ref.logits_BTV.index({keep})), 1e-4);

  Model b16 = init_random(cfg, 11, {at::kBFloat16, at::kCUDA, nullptr});
  ForwardOutput gb = b16.forward({ids.cuda(), mask.cuda()});
  EXPECT_LT(rel_err(gb.logits_BTV.cpu().index({keep}), ref.logits_BTV.index({keep})), 5e-2);
}

TEST(ModelGpu, GenerateOnGpuRuns) {
  cuda::install_cuda_experts();
  io::HfConfig cfg = testing::tiny_qwen3(true);
  Model m = init_random(cfg, 5, {at::kBFloat16, at::kCUDA, nullptr});
  GenerateConfig g;
  g.max_new_tokens = 12;
  g.seed = 3;
  auto out = generate(m, {{1, 7, 9, 11}, {1, 4}}, g);
  ASSERT_EQ(out.size(), 2u);
  for (const auto& o : out) {
    EXPECT_EQ(o.tokens.size(), 12u);
    for (int64_t t : o.tokens) EXPECT_TRUE(t >= 0 && t < cfg.vocab_size);
    for (float lp : o.logprobs) EXPECT_LE(lp, 0.f);
  }
}

}  // namespace
}  // namespace moerl::model
