// Grouped-query attention. Query heads are grouped per kv head ([B,Hkv,G*T,D]) so keys and
// values are never repeated in memory (HF's repeat_kv gives query head h kv head h / G).
#include "model/common/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "model/common/cpu_attention.h"
#include "model/common/layers.h"

namespace moerl::model {

namespace {
AttentionHook g_attention_hook = nullptr;

at::Tensor project(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  return b.defined() ? at::linear(x, w, b) : at::linear(x, w);
}
}  // namespace

at::Tensor attention(const AttentionWeights& w, const AttentionShape& shape, const at::Tensor& x_BTH,
                     const AttentionContext& ctx, KvCache* cache, int64_t layer) {
  const int64_t B = x_BTH.size(0), T = x_BTH.size(1);
  const int64_t Hq = shape.num_heads, Hkv = shape.num_kv_heads, D = shape.head_dim;

  at::Tensor q = project(x_BTH, w.q_proj, w.q_bias).view({B, T, Hq, D});
  at::Tensor k = project(x_BTH, w.k_proj, w.k_bias).view({B, T, Hkv, D});
  at::Tensor v = project(x_BTH, w.v_proj, w.v_bias).view({B, T, Hkv, D});
  if (w.q_norm.defined()) q = rms_norm(q, w.q_norm, shape.norm_eps);
  if (w.k_norm.defined()) k = rms_norm(k, w.k_norm, shape.norm_eps);
  q = apply_rope(q.transpose(1, 2), ctx.cos_BTD, ctx.sin_BTD);  // [B,Hq,T,D]
  k = apply_rope(k.transpose(1, 2), ctx.cos_BTD, ctx.sin_BTD);  // [B,Hkv,T,D]
  v = v.transpose(1, 2);

  at::Tensor keys = k, values = v;  // [B,Hkv,S,D]
  if (cache != nullptr) {
    // NOTE: the cache is an inference structure; writes are in place and not differentiable.
    if (ctx.row_slot_B.defined()) {
      KvCache::write_slots(cache->k[layer], 2, ctx.row_slot_B, k);
      KvCache::write_slots(cache->v[layer], 2, ctx.row_slot_B, v);
    } else {
      cache->k[layer].narrow(2, ctx.cache_start, T).copy_(k);
      cache->v[layer].narrow(2, ctx.cache_start, T).copy_(v);
    }
    const int64_t S = ctx.row_slot_B.defined() ? ctx.key_slots : ctx.cache_start + T;
    keys = cache->k[layer].narrow(2, 0, S);
    values = cache->v[layer].narrow(2, 0, S);
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  at::Tensor out = attention_core(q, keys, values, ctx.allowed_B1TS, scale);  // [B,T,Hq,D]
  return at::linear(out.reshape({B, T, Hq * D}), w.o_proj);
}

namespace {

// One block of queries: the scores of [B,Hkv,G,T,S] in float32 (float64 for double models).
at::Tensor attention_block(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                           const at::Tensor& allowed_B1TS, double scale) {
  const int64_t B = q.size(0), Hq = q.size(1), T = q.size(2), D = q.size(3);
  const int64_t Hkv = keys.size(1), S = keys.size(2), Dv = values.size(3), G = Hq / Hkv;
  at::Tensor q_grouped = q.reshape({B, Hkv, G * T, D});
  at::Tensor scores = at::matmul(q_grouped, keys.transpose(2, 3)) * scale;
  // Mask and softmax in float32 (float64 for double models), as HF's eager attention does.
  const bool is_double = scores.scalar_type() == at::kDouble;
  scores = scores.view({B, Hkv, G, T, S}).to(is_double ? at::kDouble : at::kFloat);
  // Fully masked rows (pad queries) get uniform weights instead of NaN: lowest finite value.
  const double lowest = is_double ? std::numeric_limits<double>::lowest() : std::numeric_limits<float>::lowest();
  scores = scores.masked_fill(allowed_B1TS.unsqueeze(1).logical_not(), lowest);
  at::Tensor probs = at::softmax(scores, -1).to(q.scalar_type());
  at::Tensor out = at::matmul(probs.view({B, Hkv, G * T, S}), values);  // [B,Hkv,G*T,Dv]
  return out.view({B, Hq, T, Dv}).transpose(1, 2);
}

}  // namespace

int64_t attention_query_block(int64_t B, int64_t Hq, int64_t T, int64_t S) {
  const int64_t per_query = std::max<int64_t>(1, B * Hq * S);  // float32 scores of one query position
  return std::clamp<int64_t>(kAttentionScoreBudget / per_query, 1, std::max<int64_t>(1, T));
}

void set_attention_hook(AttentionHook hook) { g_attention_hook = hook; }

at::Tensor attention_core(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                          const at::Tensor& allowed_B1TS, double scale) {
  // NOTE: one query position (a decode step) stays on the blocks: the CUDA-graph decode
  // (model/cuda/decode_step) does the same math, and greedy tests compare the two.
  if (g_attention_hook && q.is_cuda() && q.size(2) > 1) {
    at::Tensor out = g_attention_hook(q, keys, values, allowed_B1TS, scale);
    if (out.defined()) return out;
  }
  if (cpu_attention_applies(q, keys)) {  // one fused op instead of B*Hkv small gemms
    return cpu_attention(q, keys, values, allowed_B1TS, scale);  // [B,T,Hq,Dv]
  }
  return attention_in_blocks(q, keys, values, allowed_B1TS, scale,
                             attention_query_block(q.size(0), q.size(1), q.size(2), keys.size(2)));
}

at::Tensor attention_in_blocks(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                               const at::Tensor& allowed_B1TS, double scale, int64_t block) {
  const int64_t T = q.size(2);
  if (block >= T) return attention_block(q, keys, values, allowed_B1TS, scale);
  // Softmax is per query row, so blocks of queries give the same result as one pass while the
  // score buffer stays within kAttentionScoreBudget (a 512-token prefill at batch 128 and 128
  // heads would otherwise hold 17 GB of float32 scores, and more for the mask and softmax).
  std::vector<at::Tensor> parts;
  for (int64_t t0 = 0; t0 < T; t0 += block) {
    const int64_t n = std::min(block, T - t0);
    parts.push_back(attention_block(q.narrow(2, t0, n), keys, values, allowed_B1TS.narrow(2, t0, n), scale));
  }
  return at::cat(parts, 1);  // [B,T,Hq,Dv]
}

}  // namespace moerl::model
