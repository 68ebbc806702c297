// fast_generate: GPU decode loop with a CUDA-graph decode step (see fast_generate.h).
#include "model/cuda/fast_generate.h"

#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/core/InferenceMode.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cmath>
#include <limits>
#include <memory>

#include "base/error.h"
#include "base/log.h"
#include "model/common/layers.h"
#include "model/common/mla_attention.h"
#include "model/common/moe.h"
#include "model/cuda/moe_gpu.h"
#include "model/prefill.h"
#include "model/routing_record.h"

namespace moerl::model::cuda {
namespace {

// One decode step over static buffers: reads tok_B, cache.next_pos, slot_1, active_B; writes
// the cache at slot_1 and returns float logits [B,V].
class DecodeStep {
 public:
  DecodeStep(Model& m, KvCache& cache) : m_(m), cache_(cache) {
    const io::HfConfig& c = m.config();
    if (c.is_mla()) mla_ = mla_shape(c);
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      layers_.push_back(m.arch().bind_layer(c, m.experts(), m.state(), i));
      const LayerWeights& w = layers_.back();
      // The model's packed experts in place (InferenceMode: no grad), as the MoE hook reads them.
      stacked_.push_back(w.is_moe ? expert_stacks(w.moe.experts) : std::pair<at::Tensor, at::Tensor>{});
      if (w.attention == AttentionKind::kMla) {
        qkv_w_.emplace_back();
        qkv_b_.emplace_back();
        continue;
      }
      // One GEMM for q, k and v: their weights (and biases) stacked once, outside the graph.
      qkv_w_.push_back(at::cat({w.attn.q_proj, w.attn.k_proj, w.attn.v_proj}, 0));
      qkv_b_.push_back(w.attn.q_bias.defined() ? at::cat({w.attn.q_bias, w.attn.k_bias, w.attn.v_bias}, 0) : at::Tensor());
    }
    embed_ = m.params().at("model.embed_tokens.weight");
    norm_ = m.params().at("model.norm.weight");
    auto head = m.params().find("lm_head.weight");
    head_ = head != m.params().end() ? head->second : embed_;
    const int64_t B = cache.batch();
    auto lopt = at::TensorOptions().dtype(at::kLong).device(m.device());
    tok_B = at::zeros({B}, lopt);
    slot_1 = at::zeros({1}, lopt);
    active_B = at::ones({B}, lopt.dtype(at::kBool));
  }

  at::Tensor run() {
    const io::HfConfig& c = m_.config();
    const int64_t B = cache_.batch(), H = c.hidden_size, S = cache_.capacity();
    const double eps = c.rms_norm_eps;
    const at::ScalarType dt = m_.dtype();
    const RouterConfig rc = m_.arch().router_config(c);
    cache_.valid.index_copy_(1, slot_1, active_B.unsqueeze(1));
    at::Tensor key_ok = cache_.valid.view({B, 1, 1, S});
    auto [cos, sin] = rope_cos_sin(cache_.next_pos.unsqueeze(1), m_.rope(), dt);  // [B,1,D]
    at::Tensor x = at::embedding(embed_, tok_B).view({B, 1, H});
    int64_t moe_layer = 0;
    for (size_t i = 0; i < layers_.size(); ++i) {
      const LayerWeights& w = layers_[i];
      at::Tensor h = norm(x, w.input_norm, eps);
      if (w.attention == AttentionKind::kMla) {
        // Absorbed MLA over the whole latent cache under its validity mask (static shapes).
        MlaProjection p = mla_project(w.mla, mla_, h, cos, sin);
        cache_.latent[i].index_copy_(1, slot_1, p.latent_BTC);
        x = x + mla_attend(w.mla, mla_, p.q_BhTD, cache_.latent[i], key_ok, /*absorb=*/true);
      } else {
        x = x + gqa(w, i, h, cos, sin, key_ok);
      }
      at::Tensor hh = norm(x, w.post_attention_norm, eps).view({B, H});
      at::Tensor y;
      if (w.is_moe) {
        at::Tensor logits = router_logits(w.moe, hh, rc), idx, wt;
        route(logits, rc, &idx, &wt, w.moe.score_bias_E);
        if (routing_LBK.defined()) routing_LBK.select(0, moe_layer++).copy_(idx);  // routing replay record
        y = grouped_experts(hh, idx, wt, stacked_[i].first, stacked_[i].second).to(dt);
        if (w.moe.shared.defined()) y = y + shared_expert(w.moe.shared, hh);
      } else {
        y = model::swiglu(hh, w.mlp.gate_IH, w.mlp.up_IH, w.mlp.down_HI);
      }
      x = x + y.view({B, 1, H});
    }
    return at::linear(norm(x, norm_, eps), head_).to(at::kFloat).view({B, -1});
  }

  at::Tensor tok_B, slot_1, active_B;
  at::Tensor routing_LBK;  // record_routing: this step's expert ids per MoE layer (static, in the graph)

 private:
  // One GQA attention step: q/k/v of the new token, written at slot_1, attended over the cache.
  at::Tensor gqa(const LayerWeights& w, size_t i, const at::Tensor& h, const at::Tensor& cos, const at::Tensor& sin,
                 const at::Tensor& key_ok) {
    const io::HfConfig& c = m_.config();
    const int64_t B = cache_.batch(), Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;
    const int64_t D = c.head_dim, G = Hq / Hkv;
    const double eps = c.rms_norm_eps, scale = 1.0 / std::sqrt(static_cast<double>(D));
    const at::ScalarType dt = m_.dtype();
    at::Tensor qkv = lin(h, qkv_w_[i], qkv_b_[i]);  // [B,1,(Hq+2Hkv)*D]
    at::Tensor q = qkv.narrow(-1, 0, Hq * D).view({B, 1, Hq, D});
    at::Tensor k = qkv.narrow(-1, Hq * D, Hkv * D).view({B, 1, Hkv, D});
    at::Tensor v = qkv.narrow(-1, (Hq + Hkv) * D, Hkv * D).view({B, 1, Hkv, D});
    if (w.attn.q_norm.defined()) q = norm(q, w.attn.q_norm, eps);
    if (w.attn.k_norm.defined()) k = norm(k, w.attn.k_norm, eps);
    q = apply_rope(q.transpose(1, 2), cos, sin);  // [B,Hq,1,D]
    k = apply_rope(k.transpose(1, 2), cos, sin);  // [B,Hkv,1,D]
    cache_.k[i].index_copy_(2, slot_1, k);
    cache_.v[i].index_copy_(2, slot_1, v.transpose(1, 2));
    // Attention over the whole cache under its validity mask. (at::scaled_dot_product_attention
    // with this mask and GQA measured 2x slower at batch 16, and its greedy tokens for
    // left-padded rows diverged from model::generate's: kept explicit.)
    at::Tensor scores = at::matmul(q.reshape({B, Hkv, G, D}), cache_.k[i].transpose(2, 3)) * scale;  // [B,Hkv,G,S]
    scores = scores.to(at::kFloat).masked_fill(key_ok.logical_not(), std::numeric_limits<float>::lowest());
    at::Tensor probs = at::softmax(scores, -1).to(dt);
    at::Tensor out = at::matmul(probs, cache_.v[i]).reshape({B, 1, Hq * D});  // [B,Hkv,G,D] -> heads in order
    return at::linear(out, w.attn.o_proj);
  }

  static at::Tensor lin(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
    return b.defined() ? at::linear(x, w, b) : at::linear(x, w);
  }
  // libtorch's fused CUDA RMSNorm (one kernel; fp32 statistics like model::rms_norm).
  static at::Tensor norm(const at::Tensor& x, const at::Tensor& w, double eps) {
    return at::rms_norm(x, {x.size(-1)}, w, eps);
  }
  Model& m_;
  KvCache& cache_;
  std::vector<LayerWeights> layers_;
  std::vector<std::pair<at::Tensor, at::Tensor>> stacked_;
  std::vector<at::Tensor> qkv_w_, qkv_b_;
  MlaShape mla_;
  at::Tensor embed_, norm_, head_;
};

struct Sampled {
  at::Tensor tok, lp, slp;
};

Sampled sample(const at::Tensor& logits_BV, const SamplingConfig& s, at::Generator& gen) {
  Sampled r;
  at::Tensor logp = at::log_softmax(logits_BV, -1);
  if (s.greedy) {
    r.tok = logp.argmax(-1);
    r.slp = at::zeros({logits_BV.size(0)}, logp.options());
  } else {
    at::Tensor slogp = at::log_softmax(logits_BV / s.temperature, -1);
    at::Tensor u = at::rand(slogp.sizes(), gen, slogp.options()).clamp_(1e-20, 1.0 - 1e-7);
    r.tok = (slogp - at::log(-at::log(u))).argmax(-1);  // Gumbel-max: a draw from softmax(slogp)
    r.slp = slogp.gather(1, r.tok.unsqueeze(1)).squeeze(1);
  }
  r.lp = logp.gather(1, r.tok.unsqueeze(1)).squeeze(1);
  return r;
}

}  // namespace

bool fast_generate_accepts(const Model& m, const GenerateConfig& config) {
  const SamplingConfig& s = config.sampling;
  return m.device().is_cuda() && m.dtype() == at::kBFloat16 && m.config().sliding_window == 0 &&
         (s.greedy || (s.top_k == 0 && s.top_p >= 1.0)) && m.ep_group().world_size() == 1 &&
         !config.all_done && config.max_new_tokens > 0;
}

void install_fast_generate() {
  set_generate_fast_path({&fast_generate_accepts, [](Model& m, const std::vector<std::vector<int64_t>>& prompts,
                                                     const GenerateConfig& config) {
                            return fast_generate(m, prompts, config);
                          }});
}

// Captures one decode step into a CUDA graph on a side stream after one eager warm-up there
// (idempotent: same inputs); the graph's output logits land in `logits`. Null when capture
// fails (e.g. out of memory at real sizes): the capture is ended and the error cleared so
// the caller can decode eagerly on its own stream.
std::unique_ptr<at::cuda::CUDAGraph> capture_decode(DecodeStep& step, at::Tensor& logits) {
  c10::cuda::device_synchronize();
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  c10::cuda::CUDAStreamGuard sg(side);
  auto g = std::make_unique<at::cuda::CUDAGraph>();
  bool capturing = false;
  try {
    step.run();
    side.synchronize();
    // Thread-local capture: other threads of this process (the trainer, other in-process
    // workers) keep making synchronous CUDA calls while this one captures; the default global
    // mode makes those calls fail and invalidates the capture.
    g->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
    capturing = true;
    logits = step.run();
    capturing = false;
    g->capture_end();
    side.synchronize();
    c10::cuda::device_synchronize();
    return g;
  } catch (const std::exception& e) {
    MOERL_LOG(WARN) << "fast_generate: CUDA graph capture failed, decoding eagerly: " << e.what();
  }
  if (capturing) {  // a step threw mid-capture: end it, or every later call on this thread fails
    try {
      g->capture_end();
    } catch (const std::exception&) {
    }
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(side.stream(), &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
      cudaGraph_t partial = nullptr;
      if (cudaStreamEndCapture(side.stream(), &partial) == cudaSuccess && partial != nullptr) cudaGraphDestroy(partial);
    }
  }
  (void)cudaGetLastError();  // the capture's sticky error, not a device fault
  logits = at::Tensor();
  g.reset();
  c10::cuda::device_synchronize();
  return nullptr;
}

std::vector<Generation> fast_generate(Model& m, const std::vector<std::vector<int64_t>>& prompts,
                                      const GenerateConfig& config, bool use_graph, FastGenerateStats* stats) {
  FastGenerateStats local;
  FastGenerateStats& st = stats ? *stats : local;
  const SamplingConfig& s = config.sampling;
  s.validate();
  if (!fast_generate_accepts(m, config)) {
    st.fell_back = true;
    return generate(m, prompts, config);
  }
  c10::InferenceMode guard;
  const int64_t B = static_cast<int64_t>(prompts.size()), N = config.max_new_tokens;
  int64_t Tp = 0;
  for (const auto& p : prompts) {
    if (p.empty()) throw Error("fast_generate: an empty prompt", "give every row at least one token");
    Tp = std::max<int64_t>(Tp, static_cast<int64_t>(p.size()));
  }
  RoutingRecorder recorder(B);
  Prefill prefill = prefill_prompts(m, prompts, config.pad_id, N, config.share_prefill,
                                    config.record_routing ? &recorder : nullptr);
  KvCache& cache = prefill.cache;
  at::Tensor first_logits = prefill.logits_BV.contiguous();

  const auto dev = m.device();
  auto lopt = at::TensorOptions().dtype(at::kLong).device(dev);
  at::Generator gen = at::cuda::detail::createCUDAGenerator(dev.index() < 0 ? 0 : dev.index());
  gen.set_current_seed(config.seed);
  at::Tensor eos = at::tensor(config.eos_ids.empty() ? std::vector<int64_t>{-1} : config.eos_ids, at::kLong).to(dev);
  at::Tensor toks = at::empty({B, N}, lopt), lps = at::empty({B, N}, lopt.dtype(at::kFloat));
  at::Tensor slps = at::empty({B, N}, lopt.dtype(at::kFloat));
  at::Tensor finished = at::zeros({B}, lopt.dtype(at::kBool));

  DecodeStep step(m, cache);
  step.slot_1.fill_(Tp);
  const int64_t L = m.num_moe_layers(), K = m.arch().router_config(m.config()).top_k;
  at::Tensor routes_NLBK;  // record_routing: step t's ids (t >= 1 feeds the token sampled at t - 1)
  if (config.record_routing) {
    step.routing_LBK = at::zeros({L, B, K}, lopt);
    routes_NLBK = at::full({N, L, B, K}, -1, lopt);
  }
  std::unique_ptr<at::cuda::CUDAGraph> graph;
  at::Tensor graph_logits;
  at::Tensor logits = first_logits;
  for (int64_t t = 0; t < N; ++t) {
    if (config.cancel && config.cancel()) throw GenerationCancelled(t);  // host-side: no device sync
    if (t > 0) {
      if (use_graph && !graph && t == 1) {
        graph = capture_decode(step, graph_logits);
        use_graph = graph != nullptr;
      }
      if (graph) {
        graph->replay();
        logits = graph_logits;
      } else {
        logits = step.run();
      }
      if (routes_NLBK.defined()) routes_NLBK.select(0, t).copy_(step.routing_LBK);
    }
    Sampled smp = sample(logits, s, gen);
    at::Tensor tok = smp.tok.masked_fill(finished, config.pad_id);
    toks.select(1, t).copy_(tok);
    lps.select(1, t).copy_(smp.lp);
    slps.select(1, t).copy_(smp.slp);
    finished.logical_or_(at::isin(tok, eos).logical_and(finished.logical_not()));
    // Next step's inputs: stopped rows feed a masked pad token (batch shape stays fixed).
    step.tok_B.copy_(tok.masked_fill(finished, config.pad_id));
    if (t > 0) {
      step.slot_1.add_(1);
      cache.next_pos.add_(step.active_B.to(at::kLong));
    } else {
      // cache.next_pos already counts the prompt (prefill); the first decode writes slot Tp.
    }
    step.active_B.copy_(finished.logical_not());
  }
  cache.length = Tp + N - 1;
  st.used_graph = graph != nullptr;

  at::Tensor toks_c = toks.cpu(), lps_c = lps.cpu(), slps_c = slps.cpu();
  at::Tensor routes_c = routes_NLBK.defined() ? routes_NLBK.to(at::kInt).cpu().contiguous() : at::Tensor();
  std::vector<Generation> out(B);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t* tk = toks_c[b].data_ptr<int64_t>();
    const float* l = lps_c[b].data_ptr<float>();
    const float* sl = slps_c[b].data_ptr<float>();
    for (int64_t t = 0; t < N; ++t) {
      out[b].tokens.push_back(tk[t]);
      out[b].logprobs.push_back(l[t]);
      out[b].sample_logprobs.push_back(s.greedy ? 0.f : sl[t]);
      if (std::find(config.eos_ids.begin(), config.eos_ids.end(), tk[t]) != config.eos_ids.end()) {
        out[b].finish = FinishReason::kEos;
        break;
      }
      if (config.stop && config.stop(out[b].tokens)) {  // the device kept going; the row ends here
        out[b].finish = FinishReason::kStop;
        break;
      }
    }
    if (routes_c.defined()) {
      // The prompt (prefill), then each generated token but the last: fed at steps 1..n-1.
      out[b].routed_experts = recorder.take(b);
      const int64_t n = static_cast<int64_t>(out[b].tokens.size());
      for (int64_t t = 1; t < n; ++t) {
        at::Tensor ids_LK = routes_c[t].select(1, b).contiguous();
        const int32_t* p = ids_LK.data_ptr<int32_t>();
        out[b].routed_experts.insert(out[b].routed_experts.end(), p, p + L * K);
      }
    }
  }
  return out;
}

}  // namespace moerl::model::cuda
