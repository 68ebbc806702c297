// Device helpers shared by the elementwise kernels (swiglu.cu, token_stats.cu): float32 math on
// bf16 or f32 data, C elements moved as one aligned access.
//
//   float f[8];  load<__nv_bfloat16, 8>(row + c, f);  ...;  store<__nv_bfloat16, 8>(out + c, f);
#pragma once

#include <cuda_bf16.h>

namespace moerl::model::cuda::detail {

template <class T> __device__ inline float to_f(T v);
template <> __device__ inline float to_f(float v) { return v; }
template <> __device__ inline float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T> __device__ inline T from_f(float v);
template <> __device__ inline float from_f(float v) { return v; }
template <> __device__ inline __nv_bfloat16 from_f(float v) { return __float2bfloat16_rn(v); }

template <class T, int C> struct alignas(sizeof(T) * C) Pack { T v[C]; };

template <class T, int C>
__device__ inline void load(const T* p, float* f) {
  Pack<T, C> pk = *reinterpret_cast<const Pack<T, C>*>(p);
#pragma unroll
  for (int j = 0; j < C; ++j) f[j] = to_f(pk.v[j]);
}
template <class T, int C>
__device__ inline void store(T* p, const float* f) {
  Pack<T, C> pk;
#pragma unroll
  for (int j = 0; j < C; ++j) pk.v[j] = from_f<T>(f[j]);
  *reinterpret_cast<Pack<T, C>*>(p) = pk;
}

}  // namespace moerl::model::cuda::detail
