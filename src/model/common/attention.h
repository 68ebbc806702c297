// Causal grouped-query self-attention with rotary embeddings, optional per-head RMSNorm on
// q and k (Qwen3), padding masks and an optional KV cache. Eager math (softmax in float32)
// so results match Hugging Face's "eager" attention.
//
// Legend: B batch, T new tokens, S key slots, Hq query heads, Hkv kv heads, D head dim.
//
//   AttentionWeights w{q, k, v, o};  // nn.Linear layout; q_norm/k_norm optional
//   at::Tensor y_BTH = attention(w, x_BTH, ctx, /*cache=*/nullptr, /*layer=*/0);
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "model/common/kv_cache.h"

namespace moerl::model {

struct AttentionWeights {
  at::Tensor q_proj, k_proj, v_proj, o_proj;   // [Hq*D,H], [Hkv*D,H], [Hkv*D,H], [H,Hq*D]
  at::Tensor q_bias, k_bias, v_bias;           // undefined unless attention_bias
  at::Tensor q_norm, k_norm;                   // [D] or undefined
};

struct AttentionShape {
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  double norm_eps = 1e-6;
};

// Per-forward tensors shared by every layer: rotary tables and the key mask.
struct AttentionContext {
  at::Tensor cos_BTD, sin_BTD;
  at::Tensor allowed_B1TS;  // bool: query t may attend key slot s (causal & not padding)
  int64_t cache_start = 0;  // first cache slot written by this forward
  // Per-row cursors (KvCache::row_fill): row b's one token goes to slot row_slot_B[b], and
  // keys are read over [0, key_slots).
  at::Tensor row_slot_B;
  int64_t key_slots = 0;
};

at::Tensor attention(const AttentionWeights& w, const AttentionShape& shape, const at::Tensor& x_BTH,
                     const AttentionContext& ctx, KvCache* cache, int64_t layer);

// The core softmax(mask(q k^T * scale)) v shared by GQA and MLA: q [B,Hq,T,D], k [B,Hkv,S,D],
// v [B,Hkv,S,Dv] (query head h reads kv head h / (Hq/Hkv)), allowed [B,1,T,S]. Returns
// [B,T,Hq,Dv]. Scores and softmax in float32 (float64 for double inputs); a query with no
// allowed slot attends uniformly. CPU float32/float64 runs the fused cpu_attention op; other
// devices go over blocks of queries so the float32 scores stay within kAttentionScoreBudget
// elements (same result: the softmax is per query).
at::Tensor attention_core(const at::Tensor& q_BhTD, const at::Tensor& k_BhSD, const at::Tensor& v_BhSD,
                          const at::Tensor& allowed_B1TS, double scale);

// GPU hook (model/cuda's install_cuda_attention() sets it): attention_core hands CUDA inputs
// of more than one query position (training, prefill) to it first; an undefined result means
// "not handled" and the blocks below run. It must keep attention_core's contract.
using AttentionHook = at::Tensor (*)(const at::Tensor& q_BhTD, const at::Tensor& k_BhSD, const at::Tensor& v_BhSD,
                                     const at::Tensor& allowed_B1TS, double scale);
void set_attention_hook(AttentionHook hook);

// Score elements one block of attention_core may hold (2^28 float32 = 1 GiB), and the number of
// query positions per block for [B, Hq, T queries, S slots] (T when all fit).
constexpr int64_t kAttentionScoreBudget = int64_t{1} << 28;
int64_t attention_query_block(int64_t B, int64_t Hq, int64_t T, int64_t S);
// attention_core's non-fused path with `block` query positions per block (any device).
at::Tensor attention_in_blocks(const at::Tensor& q_BhTD, const at::Tensor& k_BhSD, const at::Tensor& v_BhSD,
                               const at::Tensor& allowed_B1TS, double scale, int64_t block);

}  // namespace moerl::model
