// Rotary position embeddings as Hugging Face computes them: the frequency table of a config
// (default RoPE, or YaRN with its attention factor), cos/sin for integer positions, and the
// two pair layouts (rotate-half; DeepSeek's interleaved pairs).
//
// Legend: B batch, T query tokens, D rotary dim (head_dim; deepseek_v3: qk_rope_head_dim).
//
//   RopeTable rope = rope_table(cfg, cfg.head_dim, at::kFloat, at::kCPU);   // once per model
//   auto [cos, sin] = rope_cos_sin(pos_BT, rope, at::kFloat);               // [B,T,D] each
//   q_BhTD = apply_rope(q_BhTD, cos, sin);              // or apply_rope_interleaved
//
// Pure functions of tensors, differentiable, on the inputs' device/dtype.
#pragma once

#include <ATen/ATen.h>

#include <utility>

#include "io/hf_config.h"

namespace moerl::model {

struct RopeTable {
  at::Tensor inv_freq;             // [D/2], float32 (float64 for double models)
  double attention_factor = 1.0;   // cos and sin are multiplied by it (YaRN; 1 otherwise)
};

// The table of cfg.rope_theta / cfg.rope_scaling for rotary width `dim`, computed in
// float32 (float64 when `dtype` is double) as transformers' ROPE_INIT_FUNCTIONS do.
RopeTable rope_table(const io::HfConfig& cfg, int64_t dim, at::ScalarType dtype, at::Device device);

// YaRN's mscale: 0.1 * mscale * ln(scale) + 1 for scale > 1, else 1.
double yarn_mscale(double scale, double mscale);

// cos/sin tables [B,T,D] for integer positions [B,T]: freqs = pos * inv_freq, repeated twice
// (HF's cat(freqs, freqs)), times the attention factor, cast to `dtype`.
std::pair<at::Tensor, at::Tensor> rope_cos_sin(const at::Tensor& position_ids_BT, const RopeTable& rope,
                                               at::ScalarType dtype);
// Default RoPE with base `theta` (the table built on the fly).
std::pair<at::Tensor, at::Tensor> rope_cos_sin(const at::Tensor& position_ids_BT, int64_t head_dim,
                                               double theta, at::ScalarType dtype);

// x * cos + rotate_half(x) * sin for x [B,heads,T,D] and cos/sin [B,T,D].
at::Tensor apply_rope(const at::Tensor& x_BhTD, const at::Tensor& cos_BTD, const at::Tensor& sin_BTD);
// DeepSeek's interleaved pairs (x0,x1),(x2,x3)...: with e = x[..., 0::2], o = x[..., 1::2]
// and c, s the first halves of cos, sin: cat(e*c - o*s, o*c + e*s). The result is in the
// rotate-half layout (evens first), so rotate queries and keys with the same function.
at::Tensor apply_rope_interleaved(const at::Tensor& x_BhTD, const at::Tensor& cos_BTD, const at::Tensor& sin_BTD);

}  // namespace moerl::model
