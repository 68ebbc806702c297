// RoPE tables and rotations; YaRN follows transformers' _compute_yarn_parameters step by
// step (same float32 operations), so the frequencies match to the last bit.
#include "model/common/rope.h"

#include <algorithm>
#include <cmath>

namespace moerl::model {

namespace {
at::ScalarType compute_type(at::ScalarType t) { return t == at::kDouble ? at::kDouble : at::kFloat; }

// The dimension at which `num_rotations` full turns fit in `max_pos` positions.
double correction_dim(double num_rotations, int64_t dim, double base, double max_pos) {
  return (static_cast<double>(dim) * std::log(max_pos / (num_rotations * 2 * M_PI))) / (2 * std::log(base));
}
}  // namespace

double yarn_mscale(double scale, double mscale) {
  return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

RopeTable rope_table(const io::HfConfig& cfg, int64_t dim, at::ScalarType dtype, at::Device device) {
  const at::ScalarType ct = compute_type(dtype);
  auto opts = at::TensorOptions().dtype(ct).device(device);
  const double base = cfg.rope_theta;
  // inv_freq_j = 1 / theta^(2j/D), computed as HF does: arange(0, D, 2) / D.
  at::Tensor exponent = at::arange(0, dim, 2, opts.dtype(at::kLong)).to(ct) / static_cast<double>(dim);
  at::Tensor pos_freqs = at::pow(base, exponent);  // [D/2]
  RopeTable t;
  const io::RopeScaling& s = cfg.rope_scaling;
  if (s.type == io::RopeType::kDefault) {
    t.inv_freq = 1.0 / pos_freqs;
    return t;
  }
  // YaRN: interpolate the low frequencies by `factor`, keep the high ones, ramp between.
  const double factor = s.factor;
  at::Tensor extrapolation = 1.0 / pos_freqs;
  at::Tensor interpolation = 1.0 / (factor * pos_freqs);
  const double max_pos = static_cast<double>(s.original_max_position_embeddings);
  double low = correction_dim(s.beta_fast, dim, base, max_pos);
  double high = correction_dim(s.beta_slow, dim, base, max_pos);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // HF: prevent a singularity
  at::Tensor ramp = ((at::arange(dim / 2, opts.dtype(at::kLong)).to(ct) - low) / (high - low)).clamp(0, 1);
  at::Tensor extrapolation_factor = 1 - ramp;
  t.inv_freq = interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor;
  if (s.attention_factor) {
    t.attention_factor = *s.attention_factor;
  } else if (s.mscale.value_or(0) != 0 && s.mscale_all_dim.value_or(0) != 0) {
    t.attention_factor = yarn_mscale(factor, *s.mscale) / yarn_mscale(factor, *s.mscale_all_dim);
  } else {
    t.attention_factor = yarn_mscale(factor, 1.0);
  }
  return t;
}

std::pair<at::Tensor, at::Tensor> rope_cos_sin(const at::Tensor& position_ids_BT, const RopeTable& rope,
                                               at::ScalarType dtype) {
  const at::ScalarType ct = compute_type(dtype);
  at::Tensor freqs = position_ids_BT.to(ct).unsqueeze(-1) * rope.inv_freq.to(ct);  // [B,T,D/2]
  at::Tensor emb = at::cat({freqs, freqs}, -1);                                   // [B,T,D]
  at::Tensor c = emb.cos(), s = emb.sin();
  if (rope.attention_factor != 1.0) {
    c = c * rope.attention_factor;
    s = s * rope.attention_factor;
  }
  return {c.to(dtype), s.to(dtype)};
}

std::pair<at::Tensor, at::Tensor> rope_cos_sin(const at::Tensor& position_ids_BT, int64_t head_dim,
                                               double theta, at::ScalarType dtype) {
  io::HfConfig c;
  c.rope_theta = theta;
  return rope_cos_sin(position_ids_BT, rope_table(c, head_dim, dtype, position_ids_BT.device()), dtype);
}

at::Tensor apply_rope(const at::Tensor& x_BhTD, const at::Tensor& cos_BTD, const at::Tensor& sin_BTD) {
  const int64_t half = x_BhTD.size(-1) / 2;
  at::Tensor x1 = x_BhTD.narrow(-1, 0, half);
  at::Tensor x2 = x_BhTD.narrow(-1, half, half);
  at::Tensor rotated = at::cat({-x2, x1}, -1);
  at::Tensor c = cos_BTD.unsqueeze(1);
  at::Tensor s = sin_BTD.unsqueeze(1);
  return x_BhTD * c + rotated * s;
}

at::Tensor apply_rope_interleaved(const at::Tensor& x_BhTD, const at::Tensor& cos_BTD, const at::Tensor& sin_BTD) {
  const int64_t half = x_BhTD.size(-1) / 2;
  at::Tensor c = cos_BTD.narrow(-1, 0, half).unsqueeze(1);
  at::Tensor s = sin_BTD.narrow(-1, 0, half).unsqueeze(1);
  at::Tensor even = x_BhTD.slice(-1, 0, x_BhTD.size(-1), 2);
  at::Tensor odd = x_BhTD.slice(-1, 1, x_BhTD.size(-1), 2);
  return at::cat({even * c - odd * s, odd * c + even * s}, -1);
}

}  // namespace moerl::model
