// MLA forward in the expand and the absorbed order (see mla_attention.h).
#include "model/common/mla_attention.h"

#include <cmath>

#include "base/check.h"

#include "model/common/layers.h"

namespace moerl::model {

namespace {

// q [B,Hq,T,dn+dr] from x, before RoPE.
at::Tensor project_query(const MlaWeights& w, const MlaShape& s, const at::Tensor& x_BTH) {
  const int64_t B = x_BTH.size(0), T = x_BTH.size(1);
  at::Tensor q = w.q_proj.defined()
                     ? at::linear(x_BTH, w.q_proj)
                     : at::linear(rms_norm(at::linear(x_BTH, w.q_a_proj), w.q_a_norm, s.norm_eps), w.q_b_proj);
  return q.view({B, T, s.num_heads, s.qk_nope_head_dim + s.qk_rope_head_dim}).transpose(1, 2);
}

at::Tensor rotate(const MlaShape& s, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  return s.rope_interleave ? apply_rope_interleaved(x, cos, sin) : apply_rope(x, cos, sin);
}

// Keys and values expanded from the latents c [B,S,R] and k_rope [B,S,dr].
at::Tensor attend_expanded(const MlaWeights& w, const MlaShape& s, const at::Tensor& q_BhTD, const at::Tensor& c_BSR,
                           const at::Tensor& k_rope_BSd, const at::Tensor& allowed) {
  const int64_t B = c_BSR.size(0), S = c_BSR.size(1), Hq = s.num_heads;
  const int64_t dn = s.qk_nope_head_dim, dr = s.qk_rope_head_dim, dv = s.v_head_dim;
  at::Tensor kv = at::linear(c_BSR, w.kv_b_proj).view({B, S, Hq, dn + dv}).transpose(1, 2);  // [B,Hq,S,dn+dv]
  at::Tensor keys = at::cat({kv.narrow(-1, 0, dn), k_rope_BSd.unsqueeze(1).expand({B, Hq, S, dr})}, -1);
  return attention_core(q_BhTD, keys, kv.narrow(-1, dn, dv), allowed, s.softmax_scale);  // [B,T,Hq,dv]
}

// W_UK folded into the query, W_UV applied after attending over the latents [B,S,R+dr].
at::Tensor attend_absorbed(const MlaWeights& w, const MlaShape& s, const at::Tensor& q_BhTD,
                           const at::Tensor& latent_BSC, const at::Tensor& allowed) {
  const int64_t Hq = s.num_heads, R = s.kv_lora_rank;
  const int64_t dn = s.qk_nope_head_dim, dr = s.qk_rope_head_dim, dv = s.v_head_dim;
  const int64_t B = q_BhTD.size(0), T = q_BhTD.size(2);
  at::Tensor w_kv = w.kv_b_proj.view({Hq, dn + dv, R});
  at::Tensor w_uk = w_kv.narrow(1, 0, dn), w_uv = w_kv.narrow(1, dn, dv);  // [Hq,dn,R], [Hq,dv,R]
  // NOTE: heads are the batch of both products ([Hq, B*T, .] x [Hq, ., .]). at::matmul of
  // [B,Hq,T,dn] by [Hq,dn,R] would broadcast the weights to B copies first: 4 GB per layer at
  // decode batch 256 with DeepSeek-V3's 128 heads, which made decode time grow with the batch.
  at::Tensor q_nope = q_BhTD.narrow(-1, 0, dn).permute({1, 0, 2, 3}).reshape({Hq, B * T, dn});
  at::Tensor q_lat = at::bmm(q_nope, w_uk).view({Hq, B, T, R}).permute({1, 0, 2, 3});  // [B,Hq,T,R]
  at::Tensor query = at::cat({q_lat, q_BhTD.narrow(-1, dn, dr)}, -1);                // [B,Hq,T,R+dr]
  at::Tensor keys = latent_BSC.unsqueeze(1);                                         // [B,1,S,R+dr]
  at::Tensor o_lat = attention_core(query, keys, keys.narrow(-1, 0, R), allowed, s.softmax_scale);  // [B,T,Hq,R]
  at::Tensor o_h = o_lat.permute({2, 0, 1, 3}).reshape({Hq, B * T, R});
  return at::bmm(o_h, w_uv.transpose(1, 2)).view({Hq, B, T, dv}).permute({1, 2, 0, 3});  // [B,T,Hq,dv]
}

}  // namespace

MlaShape mla_shape(const io::HfConfig& cfg) {
  MlaShape s;
  s.num_heads = cfg.num_attention_heads;
  s.kv_lora_rank = cfg.kv_lora_rank;
  s.qk_nope_head_dim = cfg.qk_nope_head_dim;
  s.qk_rope_head_dim = cfg.qk_rope_head_dim;
  s.v_head_dim = cfg.v_head_dim;
  s.rope_interleave = cfg.rope_interleave;
  s.norm_eps = cfg.rms_norm_eps;
  // As DeepseekV3Attention: qk_head_dim ** -0.5, times mscale(factor, mscale_all_dim)^2 for
  // a scaled RoPE whose config sets mscale_all_dim.
  s.softmax_scale = std::pow(static_cast<double>(cfg.qk_nope_head_dim + cfg.qk_rope_head_dim), -0.5);
  const io::RopeScaling& rs = cfg.rope_scaling;
  if (rs.type != io::RopeType::kDefault && rs.mscale_all_dim.value_or(0) != 0) {
    const double m = yarn_mscale(rs.factor, *rs.mscale_all_dim);
    s.softmax_scale = s.softmax_scale * m * m;
  }
  return s;
}

bool mla_absorbs(const MlaShape& s, int64_t T, int64_t S) {
  const double R = static_cast<double>(s.kv_lora_rank), dn = static_cast<double>(s.qk_nope_head_dim);
  const double dr = static_cast<double>(s.qk_rope_head_dim), dv = static_cast<double>(s.v_head_dim);
  const double t = static_cast<double>(T), k = static_cast<double>(S);
  const double expand = k * R * (dn + dv) + t * k * (dn + dr + dv);  // kv_b over S keys, then attention
  const double absorb = t * R * (dn + dv) + t * k * (2 * R + dr);     // fold W_UK/W_UV per query
  return absorb < expand;
}

MlaProjection mla_project(const MlaWeights& w, const MlaShape& s, const at::Tensor& x_BTH, const at::Tensor& cos_BTD,
                          const at::Tensor& sin_BTD) {
  const int64_t R = s.kv_lora_rank, dn = s.qk_nope_head_dim, dr = s.qk_rope_head_dim;
  at::Tensor q = project_query(w, s, x_BTH);  // [B,Hq,T,dn+dr]
  q = at::cat({q.narrow(-1, 0, dn), rotate(s, q.narrow(-1, dn, dr), cos_BTD, sin_BTD)}, -1);
  at::Tensor ckv = at::linear(x_BTH, w.kv_a_proj);                                            // [B,T,R+dr]
  at::Tensor c = rms_norm(ckv.narrow(-1, 0, R), w.kv_a_norm, s.norm_eps);                    // [B,T,R]
  at::Tensor k_rope = rotate(s, ckv.narrow(-1, R, dr).unsqueeze(1), cos_BTD, sin_BTD).squeeze(1);  // [B,T,dr]
  return {q, at::cat({c, k_rope}, -1)};
}

at::Tensor mla_attend(const MlaWeights& w, const MlaShape& s, const at::Tensor& q_BhTD, const at::Tensor& latent_BSC,
                      const at::Tensor& allowed_B1TS, bool absorb) {
  const int64_t B = q_BhTD.size(0), T = q_BhTD.size(2), R = s.kv_lora_rank, dr = s.qk_rope_head_dim;
  at::Tensor out = absorb ? attend_absorbed(w, s, q_BhTD, latent_BSC, allowed_B1TS)
                          : attend_expanded(w, s, q_BhTD, latent_BSC.narrow(-1, 0, R), latent_BSC.narrow(-1, R, dr),
                                            allowed_B1TS);  // [B,T,Hq,dv]
  return at::linear(out.reshape({B, T, s.num_heads * s.v_head_dim}), w.o_proj);
}

at::Tensor mla_attention(const MlaWeights& w, const MlaShape& s, const at::Tensor& x_BTH, const AttentionContext& ctx,
                         KvCache* cache, int64_t layer) {
  MlaProjection p = mla_project(w, s, x_BTH, ctx.cos_BTD, ctx.sin_BTD);
  if (cache == nullptr) return mla_attend(w, s, p.q_BhTD, p.latent_BTC, ctx.allowed_B1TS, /*absorb=*/false);
  MOERL_CHECK(layer < static_cast<int64_t>(cache->latent.size()))
      << "KV cache has no latent buffer for layer " << layer << ": make it with Model::make_cache";
  // NOTE: the cache is an inference structure; writes are in place and not differentiable.
  const int64_t T = x_BTH.size(1);
  if (ctx.row_slot_B.defined()) {
    KvCache::write_slots(cache->latent[layer], 1, ctx.row_slot_B, p.latent_BTC);
  } else {
    cache->latent[layer].narrow(1, ctx.cache_start, T).copy_(p.latent_BTC);
  }
  const int64_t S = ctx.row_slot_B.defined() ? ctx.key_slots : ctx.cache_start + T;
  at::Tensor latent = cache->latent[layer].narrow(1, 0, S);  // [B,S,R+dr]
  return mla_attend(w, s, p.q_BhTD, latent, ctx.allowed_B1TS, mla_absorbs(s, T, latent.size(1)));
}

}  // namespace moerl::model
