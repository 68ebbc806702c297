// Row gather/scatter/accumulate. bfloat16 is converted by bit manipulation with the same
// rounding as c10::BFloat16 (nearest even, NaN kept quiet), so results match at:: ops.
#include "ep/kernels/rows.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace moerl::ep::kernels {

static inline float bf16_to_float(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

static inline uint16_t float_to_bf16(float f) {
  if (f != f) return 0x7FC0;
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

void gather_rows(const void* src, int64_t row_bytes, const int64_t* rows, int64_t n, void* dst) {
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) std::memcpy(d + i * row_bytes, s + rows[i] * row_bytes, row_bytes);
}

void scatter_rows(const void* src, int64_t row_bytes, const int64_t* rows, int64_t n, void* dst) {
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) std::memcpy(d + rows[i] * row_bytes, s + i * row_bytes, row_bytes);
}

void accumulate_rows(const void* rows, DType dtype, int64_t h, const int64_t* token, int64_t n,
                     float* acc) {
  if (dtype == DType::kFloat32) {
    const auto* r = static_cast<const float*>(rows);
    for (int64_t i = 0; i < n; ++i) {
      float* a = acc + token[i] * h;
      const float* x = r + i * h;
      for (int64_t j = 0; j < h; ++j) a[j] += x[j];
    }
  } else {
    const auto* r = static_cast<const uint16_t*>(rows);
    for (int64_t i = 0; i < n; ++i) {
      float* a = acc + token[i] * h;
      const uint16_t* x = r + i * h;
      for (int64_t j = 0; j < h; ++j) a[j] += bf16_to_float(x[j]);
    }
  }
}

void combine_rows(const void* const* rows, const int64_t* row_of, int64_t num_sources, int64_t T, int64_t h,
                  DType dtype, void* out) {
  std::vector<float> acc(static_cast<size_t>(h));
  float* a = acc.data();
  for (int64_t t = 0; t < T; ++t) {
    std::fill(acc.begin(), acc.end(), 0.f);
    for (int64_t c = 0; c < num_sources; ++c) {
      const int64_t r = row_of[c * T + t];
      if (r < 0) continue;
      if (dtype == DType::kFloat32) {
        const float* x = static_cast<const float*>(rows[c]) + r * h;
        for (int64_t j = 0; j < h; ++j) a[j] += x[j];
      } else {
        const uint16_t* x = static_cast<const uint16_t*>(rows[c]) + r * h;
        for (int64_t j = 0; j < h; ++j) a[j] += bf16_to_float(x[j]);
      }
    }
    if (dtype == DType::kFloat32) {
      std::memcpy(static_cast<float*>(out) + t * h, a, h * 4);
    } else {
      uint16_t* o = static_cast<uint16_t*>(out) + t * h;
      for (int64_t j = 0; j < h; ++j) o[j] = float_to_bf16(a[j]);
    }
  }
}

void convert_from_float(const float* in, int64_t n, DType dtype, void* out) {
  if (dtype == DType::kFloat32) {
    std::memcpy(out, in, n * 4);
    return;
  }
  auto* o = static_cast<uint16_t*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = float_to_bf16(in[i]);
}

}  // namespace moerl::ep::kernels
