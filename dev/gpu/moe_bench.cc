// GPU benchmark: the card's bf16 matmul rate and HBM copy bandwidth (the two ceilings),
// the MoE block (Qwen3-30B-A3B shape) forward and forward+backward at 4096 and 16384
// tokens, and the EP kernels (pack, unpack, combine) against the copy bandwidth.
//   moerl_moe_bench OUT.json
#include <torch/torch.h>

#include "bench_util.h"
#include "ep/cuda/ops.h"
#include "model/cuda/decode_kernels.h"
#include "model/cuda/expert_gemm.h"
#include "model/cuda/moe_gpu.h"

using namespace moerl;
using gpubench::median_ms;

int main(int argc, char** argv) {
  const std::string out = argc > 1 ? argv[1] : "moe_bench.json";
  gpubench::Json j;
  auto bf = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  at::manual_seed(0);
  {  // ceilings
    const int64_t n = 8192;
    at::Tensor a = at::randn({n, n}, bf), b = at::randn({n, n}, bf);
    double ms = median_ms([&] { at::mm(a, b); }, 3, 10);
    j.set("matmul_bf16_tflops", 2.0 * n * n * n / ms / 1e9);
    at::Tensor src = at::randn({1 << 29}, bf), dst = at::empty_like(src);  // 1 GiB
    ms = median_ms([&] { dst.copy_(src); }, 3, 10);
    j.set("copy_gbps", 2.0 * src.numel() * 2 / ms / 1e6);
  }
  const int64_t H = 2048, I = 768, E = 128, K = 8;
  {  // MoE block
    at::Tensor router = (at::randn({E, H}, bf) * 0.02).requires_grad_(true);
    at::Tensor w13 = (at::randn({E, 2 * I, H}, bf) * 0.02).requires_grad_(true);
    at::Tensor w2 = (at::randn({E, H, I}, bf) * 0.02).requires_grad_(true);
    model::RouterConfig rc{E, K, true};
    for (int64_t T : {4096, 16384}) {
      at::Tensor x = at::randn({T, H}, bf).requires_grad_(true);
      at::Tensor dy = at::randn({T, H}, bf);
      const double flops = 6.0 * T * K * H * I + 2.0 * T * H * E;
      double ms = median_ms([&] {
        at::NoGradGuard ng;
        model::cuda::moe_block({router, w13, w2}, x, rc);
      });
      const std::string t = std::to_string(T);
      j.set("moe_fwd_ms_T" + t, ms);
      j.set("moe_fwd_tflops_T" + t, flops / ms / 1e9);
      ms = median_ms([&] {
        for (at::Tensor* p : {&router, &w13, &w2, &x}) p->mutable_grad().reset();
        auto o = model::cuda::moe_block({router, w13, w2}, x, rc);
        o.y_TH.backward(dy);
      });
      j.set("moe_fwdbwd_ms_T" + t, ms);
      j.set("moe_fwdbwd_tflops_T" + t, 3 * flops / ms / 1e9);
      // Time split: the two grouped products alone (forward), to place the rest.
      at::NoGradGuard ng;
      auto s = model::cuda::sort_by_expert(at::randint(0, E, {T, K}, bf.dtype(at::kLong)), E);
      at::Tensor xp = at::randn({T * K, H}, bf), hp = at::randn({T * K, I}, bf);
      ms = median_ms([&] {
        model::cuda::grouped_linear(xp, w13, s.offs);
        model::cuda::grouped_linear(hp, w2, s.offs);
      });
      j.set("grouped_mm_fwd_ms_T" + t, ms);
      j.set("grouped_mm_fwd_tflops_T" + t, 6.0 * T * K * H * I / ms / 1e9);
    }
  }
  {  // Decode shapes: T tokens of a decode step (T*K rows, ~T*K/E per expert under uniform
     // routing). The expert products read every touched expert's weights once, so they are
     // timed against the copy rate: bytes = touched experts' weights + rows in + rows out.
     // Both paths side by side: at::_grouped_mm (+ the SwiGLU kernel) and expert_gemm.
    at::NoGradGuard ng;
    at::Tensor w13 = at::randn({E, 2 * I, H}, bf) * 0.02, w2 = at::randn({E, H, I}, bf) * 0.02;
    at::Tensor router = at::randn({E, H}, bf) * 0.02;
    model::RouterConfig rc{E, K, true};
    cudaStream_t st = c10::cuda::getCurrentCUDAStream().stream();
    for (int64_t T : {64, 128, 256, 384}) {
      const std::string t = std::to_string(T);
      auto s = model::cuda::sort_by_expert(at::randint(0, E, {T, K}, bf.dtype(at::kLong)), E);
      at::Tensor load = s.offs.to(at::kLong).diff(1, 0, at::zeros({1}, s.offs.options().dtype(at::kLong)));
      const int64_t touched = (load > 0).sum().item<int64_t>();
      at::Tensor x = at::randn({T, H}, bf), xp = at::randn({T * K, H}, bf), hp = at::randn({T * K, I}, bf);
      at::Tensor h = at::empty({T * K, I}, bf), y = at::empty({T * K, H}, bf);
      const double b13 = 2.0 * touched * 2 * I * H + 2.0 * T * K * (H + I);  // gate/up + SwiGLU out
      const double b2 = 2.0 * touched * H * I + 2.0 * T * K * (I + H);
      const double copy = j.v["copy_gbps"];
      double ms = median_ms([&] { model::cuda::swiglu(model::cuda::grouped_linear(xp, w13, s.offs)); }, 3, 30);
      j.set("decode_w13_swiglu_grouped_mm_pct_of_copy_T" + t, 100.0 * b13 / ms / 1e6 / copy);
      const double ms13 = ms;
      ms = median_ms([&] {
        model::cuda::expert_gemm(x.data_ptr(), s.src_token.data_ptr<int64_t>(), w13.data_ptr(),
                                 s.offs.data_ptr<int32_t>(), E, I, H, true, h.data_ptr(), st);
      }, 3, 30);
      j.set("decode_w13_swiglu_expert_gemm_pct_of_copy_T" + t, 100.0 * b13 / ms / 1e6 / copy);
      j.set("decode_w13_expert_gemm_speedup_T" + t, ms13 / ms);
      ms = median_ms([&] { model::cuda::grouped_linear(hp, w2, s.offs); }, 3, 30);
      j.set("decode_w2_grouped_mm_pct_of_copy_T" + t, 100.0 * b2 / ms / 1e6 / copy);
      const double ms2 = ms;
      ms = median_ms([&] {
        model::cuda::expert_gemm(hp.data_ptr(), nullptr, w2.data_ptr(), s.offs.data_ptr<int32_t>(), E, H, I, false,
                                 y.data_ptr(), st);
      }, 3, 30);
      j.set("decode_w2_expert_gemm_pct_of_copy_T" + t, 100.0 * b2 / ms / 1e6 / copy);
      j.set("decode_w2_expert_gemm_speedup_T" + t, ms2 / ms);
      for (bool small : {false, true}) {
        model::cuda::set_decode_kernels({.experts = small});
        ms = median_ms([&] { model::cuda::moe_block({router, w13, w2}, x, rc); }, 3, 30);
        const std::string k = small ? "expert_gemm" : "grouped_mm";
        j.set("decode_moe_block_" + k + "_ms_T" + t, ms);
        j.set("decode_moe_block_" + k + "_pct_of_copy_T" + t, 100.0 * (b13 + b2) / ms / 1e6 / copy);
      }
    }
  }
  {  // EP kernels at the large size: T=16384 tokens, K=8, H=2048 bf16 (512 MiB of rows)
    at::NoGradGuard ng;
    const int64_t T = 16384, M = T * K;
    at::Tensor x = at::randn({T, H}, bf);
    at::Tensor y = at::randn({M, H}, bf);
    at::Tensor perm = at::randperm(M, bf.dtype(at::kLong));
    at::Tensor src_token = at::div(perm, K, "floor");
    at::Tensor pos = at::argsort(perm).view({T, K});
    at::Tensor w = at::rand({T, K}, bf.dtype(at::kFloat));
    at::Tensor dst = at::empty({M, H}, bf);
    const double row_bytes = H * 2.0;
    double ms = median_ms([&] { ep::cuda::pack_rows(x, src_token); });
    j.set("ep_pack_gbps", 2 * M * row_bytes / ms / 1e6);
    ms = median_ms([&] { ep::cuda::unpack_rows(y, perm, dst); });
    j.set("ep_unpack_gbps", 2 * M * row_bytes / ms / 1e6);
    ms = median_ms([&] { ep::cuda::weighted_combine(y, pos, w); });
    j.set("ep_combine_gbps", (M + T) * row_bytes / ms / 1e6);
    ms = median_ms([&] { x.index_select(0, src_token); });
    j.set("torch_index_select_gbps", 2 * M * row_bytes / ms / 1e6);
  }
  j.set("copy_gbps_ref", j.v["copy_gbps"]);
  for (const char* k : {"ep_pack_gbps", "ep_unpack_gbps", "ep_combine_gbps"})
    j.set(std::string(k) + "_pct_of_copy", 100.0 * j.v[k] / j.v["copy_gbps"]);
  j.write(out);
  return 0;
}
