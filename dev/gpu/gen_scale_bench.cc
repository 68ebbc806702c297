// Generation at the Qwen3-30B-A3B layer shape (hidden 2048, 32/4 heads of 128, 128 experts
// top-8, expert width 768, vocab 151936), random bf16 weights made on the GPU, with as many
// of its 48 layers as fit today (argument 2, default 16): decode ms per step, new tokens/s,
// GPU memory held, and the decode step's bytes over its time as a fraction of the measured
// device copy rate (the roofline of a memory-bound decode). A baseline for the real-scale
// work (issue #19), not a target.
//   moerl_gen_scale_bench OUT.json [LAYERS] [PROMPT]
#include <chrono>
#include <cmath>

#include "bench_util.h"
#include "model/archs/arch.h"
#include "model/cuda/fast_generate.h"
#include "model/cuda/moe_gpu.h"
#include "model/generate.h"
#include "model/model.h"

using namespace moerl;

namespace {

io::HfConfig qwen3_30b_a3b(int64_t layers) {
  io::HfConfig c;
  c.model_type = "qwen3_moe";
  c.vocab_size = 151936;
  c.hidden_size = 2048;
  c.intermediate_size = 6144;
  c.moe_intermediate_size = 768;
  c.num_hidden_layers = layers;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 4;
  c.head_dim = 128;
  c.num_experts = 128;
  c.num_experts_per_tok = 8;
  c.norm_topk_prob = true;
  c.max_position_embeddings = 40960;
  c.rope_theta = 1e6;
  c.bos_token_id = 151643;
  c.eos_token_id = 151645;
  c.pad_token_id = 151643;
  return c;
}

// Random weights drawn on the GPU in bf16 (model::init_random draws float32 on the host: 120 GB
// for the whole model).
model::Model random_on_gpu(const io::HfConfig& c) {
  const model::Arch& arch = model::find_arch(c.model_type);
  const model::ExpertRange all{0, c.num_experts};
  model::Params p;
  auto o = at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA);
  for (const model::ParamSpec& s : arch.param_specs(c, all)) {
    switch (s.init) {
      case model::Init::kNormal: p[s.name] = at::empty(s.shape, o).normal_(0.0, 0.02); break;
      case model::Init::kOnes: p[s.name] = at::ones(s.shape, o); break;
      case model::Init::kZeros: p[s.name] = at::zeros(s.shape, o); break;
    }
  }
  arch.canonicalize(c, all, p);
  return model::Model(c, std::move(p), {at::kBFloat16, at::kCUDA, nullptr});
}

double used_gib() {
  size_t free = 0, total = 0;
  gpubench::cuda_ok(cudaMemGetInfo(&free, &total), "meminfo");
  return static_cast<double>(total - free) / (1ull << 30);
}

// Device-to-device copy rate in bytes/s (read + write counted), median of 10 copies of 2 GiB.
double copy_rate() {
  const int64_t n = int64_t{1} << 31;
  at::Tensor a = at::empty({n}, at::TensorOptions().dtype(at::kByte).device(at::kCUDA)), b = at::empty_like(a);
  const double ms = gpubench::median_ms([&] { b.copy_(a); }, 2, 10);
  return 2.0 * static_cast<double>(n) / (ms * 1e-3);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string out = argc > 1 ? argv[1] : "gen_scale_bench.json";
  const int64_t layers = argc > 2 ? std::atoll(argv[2]) : 16;
  const int64_t P = argc > 3 ? std::atoll(argv[3]) : 64;
  gpubench::Json j;
  const double rate = copy_rate();
  j.set("copy_rate_GBps", rate / 1e9);
  const io::HfConfig c = qwen3_30b_a3b(layers);
  model::cuda::install_cuda_experts();
  model::Model m = random_on_gpu(c);
  j.set("layers", static_cast<double>(layers));
  j.set("mem_params_GiB", used_gib());
  // Bytes one decode step reads: every weight but the embedding table (B rows of it), the
  // experts the batch touches (uniform routing: E (1 - (1 - K/E)^B) per layer), and the whole
  // KV cache capacity (the graph step attends over it under a validity mask).
  const double bf = 2, H = c.hidden_size, E = c.num_experts, K = c.num_experts_per_tok, I = c.moe_intermediate_size;
  const double expert_bytes = 3 * H * I * bf;
  const double attn_bytes = H * (c.num_attention_heads + 2 * c.num_key_value_heads) * c.head_dim * bf +
                            c.num_attention_heads * c.head_dim * H * bf + E * H * bf;  // qkv, o, router
  const double head_bytes = static_cast<double>(c.vocab_size) * H * bf;
  for (int64_t B : {64, 128, 256}) {
    const int64_t n1 = 8, n2 = 72;
    at::Tensor ids = at::randint(3, 151000, {B, P}, at::kLong);
    std::vector<std::vector<int64_t>> prompts(B);
    for (int64_t b = 0; b < B; ++b) prompts[b].assign(ids[b].data_ptr<int64_t>(), ids[b].data_ptr<int64_t>() + P);
    model::GenerateConfig g;
    g.sampling.temperature = 1.0;
    g.seed = 7;
    model::cuda::FastGenerateStats st;
    double peak = 0;
    auto timed = [&](int64_t n) {
      g.max_new_tokens = n;
      gpubench::cuda_ok(cudaDeviceSynchronize(), "sync");
      auto t0 = std::chrono::steady_clock::now();
      auto res = model::cuda::fast_generate(m, prompts, g, /*use_graph=*/true, &st);
      gpubench::cuda_ok(cudaDeviceSynchronize(), "sync");
      peak = std::max(peak, used_gib());
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    timed(n1);  // warm-up (stacks, graphs, allocator)
    const double t1 = timed(n1), t2 = timed(n2);
    const double step_s = (t2 - t1) / static_cast<double>(n2 - n1);
    const double touched = E * (1 - std::pow(1 - K / E, static_cast<double>(B)));
    const double kv_bytes = static_cast<double>(B) * (P + n2) * 2 * c.num_key_value_heads * c.head_dim * bf;
    const double step_bytes = head_bytes + layers * (attn_bytes + touched * expert_bytes + kv_bytes);
    const std::string k = "B" + std::to_string(B) + "_";
    j.set(k + "decode_ms_per_step", 1e3 * step_s);
    j.set(k + "decode_new_tok_per_s", static_cast<double>(B) / step_s);
    j.set(k + "GB_read_per_step", step_bytes / 1e9);
    j.set(k + "roofline_fraction", step_bytes / step_s / rate);
    j.set(k + "prefill_plus_8_s", t1);
    j.set(k + "used_graph", st.used_graph ? 1 : 0);
    j.set(k + "mem_peak_GiB", peak);
  }
  j.write(out);
  return 0;
}
