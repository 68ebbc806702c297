// Multi-head latent attention (DeepSeek-V2/V3 "MLA"), as transformers' DeepseekV3Attention:
//   q  = q_b(rms(q_a(x)))  or  q_proj(x)         -> per head [q_nope (dn) | q_rope (dr)]
//   kv = kv_a_proj_with_mqa(x) = [c (R) | k_rope (dr)],  c = rms(c)   (one latent per token)
//   q_rope, k_rope rotated (RoPE on the rope part only; interleaved pairs when rope_interleave)
//   k_h = [W_UK_h c | k_rope], v_h = W_UV_h c   (kv_b_proj = [W_UK; W_UV] per head)
//   out = o_proj(softmax(q k^T * scale) v),  scale = (dn+dr)^-0.5 * mscale(YaRN)^2
// The KV cache holds [c | k_rope] per token (R + dr numbers, not 2*heads*dims).
//
// Two evaluation orders, same math: "expand" computes k and v for every key token (training,
// prefill); "absorb" folds W_UK into the query (q_nope W_UK_h, width R) and W_UV after the
// attention, so the scores read the cached latent directly, as one multi-query attention
// with a single kv head of width R + dr. mla_absorbs() picks the cheaper order from the
// token counts (decode over a long cache absorbs; a forward without a cache expands).
//
// Legend: B batch, T new tokens, S key slots, Hq heads, R kv_lora_rank.
//
//   MlaShape shape = mla_shape(cfg);
//   at::Tensor y_BTH = mla_attention(w, shape, x_BTH, ctx, cache, layer);
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "io/hf_config.h"
#include "model/common/attention.h"
#include "model/common/kv_cache.h"

namespace moerl::model {

struct MlaWeights {
  at::Tensor q_proj;                        // [Hq*(dn+dr), H] when q_lora_rank is null
  at::Tensor q_a_proj, q_a_norm, q_b_proj;  // [Rq,H], [Rq], [Hq*(dn+dr), Rq] otherwise
  at::Tensor kv_a_proj;                     // [R+dr, H] (kv_a_proj_with_mqa)
  at::Tensor kv_a_norm;                     // [R]
  at::Tensor kv_b_proj;                     // [Hq*(dn+dv), R]: per head W_UK (dn rows), W_UV (dv rows)
  at::Tensor o_proj;                        // [H, Hq*dv]
};

struct MlaShape {
  int64_t num_heads = 0;
  int64_t kv_lora_rank = 0;      // R
  int64_t qk_nope_head_dim = 0;  // dn
  int64_t qk_rope_head_dim = 0;  // dr
  int64_t v_head_dim = 0;        // dv
  bool rope_interleave = true;
  double softmax_scale = 1.0;
  double norm_eps = 1e-6;

  int64_t latent_dim() const { return kv_lora_rank + qk_rope_head_dim; }
};

MlaShape mla_shape(const io::HfConfig& cfg);

// True when the absorbed order costs fewer multiply-adds for T queries over S keys.
bool mla_absorbs(const MlaShape& shape, int64_t T, int64_t S);

// The two halves of mla_attention, for decode loops that manage the cache themselves
// (model/cuda's graph decode): the new tokens' rotated queries [B,Hq,T,dn+dr] and latents
// [B,T,R+dr] ([c | k_rope], what the cache stores) ...
struct MlaProjection {
  at::Tensor q_BhTD;
  at::Tensor latent_BTC;
};
MlaProjection mla_project(const MlaWeights& w, const MlaShape& shape, const at::Tensor& x_BTH,
                          const at::Tensor& cos_BTD, const at::Tensor& sin_BTD);
// ... and attention of those queries over latents [B,S,R+dr] (allowed [B,1,T,S]), in the
// absorbed or the expanded order, through o_proj: [B,T,H].
at::Tensor mla_attend(const MlaWeights& w, const MlaShape& shape, const at::Tensor& q_BhTD,
                      const at::Tensor& latent_BSC, const at::Tensor& allowed_B1TS, bool absorb);

// x [B,T,H] -> [B,T,H]. With a cache (KvCacheKind::kLatent) the new tokens' latents are
// written at ctx.cache_start and attention runs over every filled slot. Differentiable
// without a cache.
at::Tensor mla_attention(const MlaWeights& w, const MlaShape& shape, const at::Tensor& x_BTH,
                         const AttentionContext& ctx, KvCache* cache, int64_t layer);

}  // namespace moerl::model
