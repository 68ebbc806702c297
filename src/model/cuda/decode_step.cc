// DecodeStep: the static-shape decode step captured by fast_generate.
#include "model/cuda/decode_step.h"

#include <c10/cuda/CUDAStream.h>

#include <cmath>
#include <limits>
#include <string>

#include "base/error.h"
#include "model/common/layers.h"
#include "model/common/moe.h"
#include "model/cuda/decode_attention.h"
#include "model/cuda/decode_kernels.h"
#include "model/cuda/moe_gpu.h"

namespace moerl::model::cuda {

DecodeStep::DecodeStep(Model& m, KvCache& cache) : m_(m), cache_(cache) {
  const io::HfConfig& c = m.config();
  if (c.is_mla()) mla_ = mla_shape(c);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    layers_.push_back(m.arch().bind_layer(c, m.experts(), m.state(), i));
    const LayerWeights& w = layers_.back();
    // The model's packed experts in place (InferenceMode: no grad), as the MoE hook reads them.
    stacked_.emplace_back();
    qkv_w_.emplace_back();
    qkv_b_.emplace_back();
  }
  reload_weights();
  embed_ = m.params().at("model.embed_tokens.weight");
  norm_ = m.params().at("model.norm.weight");
  auto head = m.params().find("lm_head.weight");
  head_ = head != m.params().end() ? head->second : embed_;
  const int64_t B = cache.batch();
  auto lopt = at::TensorOptions().dtype(at::kLong).device(m.device());
  tok_B = at::zeros({B}, lopt);
  slot_B = at::zeros({B}, lopt);
  active_B = at::ones({B}, lopt.dtype(at::kBool));
}

void DecodeStep::reload_weights() {
  // Defined tensors are refilled in place (a captured graph reads them); the first call makes them.
  auto refill = [](at::Tensor& into, const at::Tensor& from) {
    if (!into.defined()) {
      into = from;
    } else if (into.data_ptr() != from.data_ptr()) {
      into.copy_(from);
    }
  };
  for (size_t i = 0; i < layers_.size(); ++i) {
    const LayerWeights& w = layers_[i];
    // The model's packed experts are the stacks themselves (InferenceMode: no grad), as the
    // MoE hook reads them; unpacked ones are stacked copies.
    if (w.is_moe) {
      auto [w13, w2] = expert_stacks(w.moe.experts);
      refill(stacked_[i].first, w13);
      refill(stacked_[i].second, w2);
    }
    if (w.attention == AttentionKind::kMla) continue;
    // One GEMM for q, k and v: their weights (and biases) stacked outside the graph.
    refill(qkv_w_[i], at::cat({w.attn.q_proj, w.attn.k_proj, w.attn.v_proj}, 0));
    if (w.attn.q_bias.defined()) refill(qkv_b_[i], at::cat({w.attn.q_bias, w.attn.k_bias, w.attn.v_bias}, 0));
  }
}

at::Tensor DecodeStep::run() {
  const io::HfConfig& c = m_.config();
  const int64_t B = cache_.batch(), H = c.hidden_size, S = cache_.capacity();
  const double eps = c.rms_norm_eps;
  const at::ScalarType dt = m_.dtype();
  const RouterConfig rc = m_.arch().router_config(c);
  KvCache::write_slots(cache_.valid, 1, slot_B, active_B.unsqueeze(1));
  at::Tensor key_ok = cache_.valid.view({B, 1, 1, S});
  auto [cos, sin] = rope_cos_sin(cache_.next_pos.unsqueeze(1), m_.rope(), dt);  // [B,1,D]
  at::Tensor x = at::embedding(embed_, tok_B).view({B, 1, H});
  int64_t moe_layer = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const LayerWeights& w = layers_[i];
    at::Tensor h = rms_norm(x, w.input_norm, eps);
    if (w.attention == AttentionKind::kMla) {
      // Absorbed MLA over the whole latent cache under its validity mask (static shapes).
      MlaProjection p = mla_project(w.mla, mla_, h, cos, sin);
      KvCache::write_slots(cache_.latent[i], 1, slot_B, p.latent_BTC);
      x = x + mla_attend(w.mla, mla_, p.q_BhTD, cache_.latent[i], key_ok, /*absorb=*/true);
    } else {
      x = x + gqa(w, i, h, cos, sin, key_ok);
    }
    at::Tensor hh = rms_norm(x, w.post_attention_norm, eps).view({B, H});
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
  return at::linear(rms_norm(x, norm_, eps), head_).to(at::kFloat).view({B, -1});
}

// One GQA attention step: q/k/v of the new token, written at slot_B, attended over the cache.
at::Tensor DecodeStep::gqa(const LayerWeights& w, size_t i, const at::Tensor& h, const at::Tensor& cos, const at::Tensor& sin,
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
  if (w.attn.q_norm.defined()) q = rms_norm(q, w.attn.q_norm, eps);
  if (w.attn.k_norm.defined()) k = rms_norm(k, w.attn.k_norm, eps);
  q = apply_rope(q.transpose(1, 2), cos, sin);  // [B,Hq,1,D]
  k = apply_rope(k.transpose(1, 2), cos, sin);  // [B,Hkv,1,D]
  KvCache::write_slots(cache_.k[i], 2, slot_B, k);
  KvCache::write_slots(cache_.v[i], 2, slot_B, v.transpose(1, 2));
  if (decode_kernels().attention && dt == at::kBFloat16 && decode_attention_fits(Hq, Hkv, D)) {
    // One kernel: each (row, KV head) reads its keys and values once, up to the row's write
    // slot: no later slot is valid (decode_attention.h).
    const at::Tensor qc = q.contiguous();  // [B,Hq,1,D]
    at::Tensor out = at::empty({B, 1, Hq * D}, qc.options());
    const cudaError_t err =
        decode_attention(qc.data_ptr(), cache_.k[i].data_ptr(), cache_.v[i].data_ptr(), cache_.valid.data_ptr<bool>(),
                         slot_B.data_ptr<int64_t>(), B, Hq, Hkv, cache_.capacity(), D, static_cast<float>(scale),
                         out.data_ptr(), c10::cuda::getCurrentCUDAStream().stream());
    if (err != cudaSuccess) {
      throw Error(std::string("decode step: decode_attention failed: ") + cudaGetErrorString(err),
                  "switch the kernel off (model/cuda/decode_kernels.h) to run the at:: ops", ErrorCode::kInternal);
    }
    return at::linear(out, w.attn.o_proj);
  }
  // Attention over the whole cache under its validity mask. (at::scaled_dot_product_attention
  // with this mask and GQA measured 2x slower at batch 16, and its greedy tokens for
  // left-padded rows diverged from model::generate's: kept explicit.)
  at::Tensor scores = at::matmul(q.reshape({B, Hkv, G, D}), cache_.k[i].transpose(2, 3)) * scale;  // [B,Hkv,G,S]
  scores = scores.to(at::kFloat).masked_fill(key_ok.logical_not(), std::numeric_limits<float>::lowest());
  at::Tensor probs = at::softmax(scores, -1).to(dt);
  at::Tensor out = at::matmul(probs, cache_.v[i]).reshape({B, 1, Hq * D});  // [B,Hkv,G,D] -> heads in order
  return at::linear(out, w.attn.o_proj);
}

}  // namespace moerl::model::cuda
