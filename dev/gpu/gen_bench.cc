// GPU generation benchmark: a random 8-layer Qwen3-MoE (vocab 32000, hidden 1024, 16/4
// heads of 64, 32 experts top-4, expert width 512), bf16 on the GPU, 64-token prompts,
// 128 new tokens sampled at temperature 1, batch 16 and 128; new tokens per second.
//   moerl_gen_bench OUT.json
#include <chrono>

#include "bench_util.h"
#include "model/cuda/fast_generate.h"
#include "model/cuda/moe_gpu.h"
#include "model/generate.h"
#include "model/model.h"

using namespace moerl;

int main(int argc, char** argv) {
  const std::string out = argc > 1 ? argv[1] : "gen_bench.json";
  gpubench::Json j;
  io::HfConfig c;
  c.model_type = "qwen3_moe";
  c.vocab_size = 32000;
  c.hidden_size = 1024;
  c.intermediate_size = 3072;
  c.moe_intermediate_size = 512;
  c.num_hidden_layers = 8;
  c.num_attention_heads = 16;
  c.num_key_value_heads = 4;
  c.head_dim = 64;
  c.num_experts = 32;
  c.num_experts_per_tok = 4;
  c.norm_topk_prob = true;
  c.max_position_embeddings = 4096;
  c.rope_theta = 1e6;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  c.pad_token_id = 0;
  model::cuda::install_cuda_experts();
  model::Model m = model::init_random(c, 1, {at::kBFloat16, at::kCUDA, nullptr});
  const int64_t P = 64, N = 128;
  // Variants: fast_generate with the CUDA-graph decode step (the GPU path), the same eager,
  // and model::generate (host loop, CPU sampling) with grouped experts and with the generic loop.
  enum class Path { kFastGraph, kFastEager, kGenerate, kGenerateGeneric };
  struct Run { Path path; const char* name; int64_t B; };
  const Run runs[] = {{Path::kFastGraph, "fast_graph", 16}, {Path::kFastGraph, "fast_graph", 128},
                      {Path::kFastEager, "fast_eager", 128}, {Path::kGenerate, "generate", 16},
                      {Path::kGenerate, "generate", 128}, {Path::kGenerateGeneric, "generate_generic", 128}};
  for (const Run& r : runs) {
    if (r.path == Path::kGenerateGeneric) model::set_local_experts_hook(nullptr);
    at::Tensor ids = at::randint(3, c.vocab_size, {r.B, P}, at::kLong);
    std::vector<std::vector<int64_t>> prompts(r.B);
    for (int64_t b = 0; b < r.B; ++b) prompts[b].assign(ids[b].data_ptr<int64_t>(), ids[b].data_ptr<int64_t>() + P);
    model::GenerateConfig g;
    g.sampling.temperature = 1.0;
    g.seed = 7;
    model::cuda::FastGenerateStats st;
    auto go = [&](int64_t n) {
      g.max_new_tokens = n;
      if (r.path == Path::kFastGraph || r.path == Path::kFastEager)
        return model::cuda::fast_generate(m, prompts, g, r.path == Path::kFastGraph, &st);
      return model::generate(m, prompts, g);
    };
    go(8);  // warm-up
    gpubench::cuda_ok(cudaDeviceSynchronize(), "sync");
    auto t0 = std::chrono::steady_clock::now();
    auto res = go(N);
    gpubench::cuda_ok(cudaDeviceSynchronize(), "sync");
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    int64_t toks = 0;
    for (const auto& x : res) toks += static_cast<int64_t>(x.tokens.size());
    const std::string k = std::string(r.name) + "_B" + std::to_string(r.B);
    j.set(k + "_tok_per_s", toks / s);
    j.set(k + "_ms_per_step", 1e3 * s / N);
    if (r.path == Path::kFastGraph) j.set(k + "_used_graph", st.used_graph ? 1 : 0);
  }
  j.write(out);
  return 0;
}
