// Routing mismatch between a bf16 GPU rollout and an fp32 GPU trainer with the same weights,
// with and without rollout routing replay (R3). A random Qwen3-30B-A3B-shaped model (hidden
// 2048, 32/4 heads of 128, 128 experts top-8, expert width 768, vocab 151936) with
// `layers` layers (default 8): the rollout copy in bf16 generates with record_routing; the
// fp32 copy re-scores prompt + response (a) routing live and (b) replaying the recorded
// experts. Reports the fraction of (token, layer) selections and of tokens with any layer
// that differ, mean |logp_behav - logp_old| and the k3 KL(behav || old), each for (a) and (b).
//   moerl_routing_mismatch OUT.json [layers] [batch] [new_tokens]
#include <chrono>
#include <cstdio>

#include "bench_util.h"
#include "model/cuda/moe_gpu.h"
#include "model/generate.h"
#include "model/model.h"

using namespace moerl;

int main(int argc, char** argv) {
  const std::string out = argc > 1 ? argv[1] : "routing_mismatch.json";
  const int64_t layers = argc > 2 ? std::atoll(argv[2]) : 8;
  const int64_t B = argc > 3 ? std::atoll(argv[3]) : 16;
  const int64_t N = argc > 4 ? std::atoll(argv[4]) : 128;
  const int64_t P = 64;
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
  c.max_position_embeddings = 4096;
  c.rope_theta = 1e6;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  c.pad_token_id = 0;
  model::cuda::install_cuda_experts();
  model::Model trainer = model::init_random(c, 1, {at::kFloat, at::kCUDA, nullptr});
  model::Model rollout = model::init_random(c, 1, {at::kBFloat16, at::kCUDA, nullptr});
  rollout.load_weights(trainer.params());  // the same weights, rounded to bf16

  at::Tensor ids = at::randint(3, c.vocab_size, {B, P}, at::kLong);
  std::vector<std::vector<int64_t>> prompts(B);
  for (int64_t b = 0; b < B; ++b) prompts[b].assign(ids[b].data_ptr<int64_t>(), ids[b].data_ptr<int64_t>() + P);
  model::GenerateConfig g;
  g.max_new_tokens = N;
  g.seed = 7;
  g.record_routing = true;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<model::Generation> gens = model::generate(rollout, prompts, g);
  const double gen_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const int64_t L = trainer.num_moe_layers(), K = c.num_experts_per_tok;
  double sel_diff[2] = {0, 0}, tok_diff[2] = {0, 0}, abs_lp[2] = {0, 0}, kl[2] = {0, 0};
  int64_t sel_n = 0, tok_n = 0, lp_n = 0;
  at::NoGradGuard no_grad;
  for (int64_t b = 0; b < B; ++b) {
    const model::Generation& gen = gens[b];
    std::vector<int64_t> seq = prompts[b];
    seq.insert(seq.end(), gen.tokens.begin(), gen.tokens.end());
    const int64_t T = static_cast<int64_t>(seq.size()), fed = T - 1;
    at::Tensor x = at::tensor(seq).reshape({1, T});
    at::Tensor rec = at::full({1, T, L, K}, -1, at::kLong);
    at::Tensor flat = at::tensor(std::vector<int64_t>(gen.routed_experts.begin(), gen.routed_experts.end()));
    rec.view({-1}).narrow(0, 0, flat.numel()).copy_(flat);
    at::Tensor rec_sorted = std::get<0>(rec[0].narrow(0, 0, fed).sort(-1));  // [fed, L, K] as sets
    for (int mode = 0; mode < 2; ++mode) {
      model::ForwardOutput o = trainer.forward({.input_ids = x, .routing_replay = mode == 1 ? rec : at::Tensor()});
      std::vector<at::Tensor> sel;
      for (const auto& r : o.routing) sel.push_back(r.topk_idx_TK.cpu());
      at::Tensor live = std::get<0>(at::stack(sel, 1).narrow(0, 0, fed).sort(-1));  // [fed, L, K]
      at::Tensor differ_TL = live.ne(rec_sorted).any(-1);
      sel_diff[mode] += differ_TL.sum().item<double>();
      tok_diff[mode] += differ_TL.any(-1).sum().item<double>();
      at::Tensor lp = o.logits_BTV[0].log_softmax(-1).cpu();
      for (int64_t k = 0; k < static_cast<int64_t>(gen.tokens.size()); ++k) {
        const double old = lp[P + k - 1][gen.tokens[k]].item<double>();
        const double d = old - gen.logprobs[k];  // log pi_old - log pi_behav
        abs_lp[mode] += std::abs(d);
        kl[mode] += std::exp(d) - 1 - d;
      }
    }
    sel_n += fed * L;
    tok_n += fed;
    lp_n += static_cast<int64_t>(gen.tokens.size());
  }
  gpubench::Json j;
  j.set("layers", static_cast<double>(layers));
  j.set("batch", static_cast<double>(B));
  j.set("new_tokens", static_cast<double>(N));
  j.set("generate_seconds", gen_s);
  const char* names[2] = {"live", "replay"};
  for (int mode = 0; mode < 2; ++mode) {
    const std::string k = names[mode];
    j.set(k + "_selection_diff_frac", sel_diff[mode] / sel_n);
    j.set(k + "_token_any_layer_diff_frac", tok_diff[mode] / tok_n);
    j.set(k + "_mean_abs_logp_diff", abs_lp[mode] / lp_n);
    j.set(k + "_mismatch_kl_k3", kl[mode] / lp_n);
  }
  j.write(out);
  return 0;
}
