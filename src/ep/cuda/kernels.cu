// EP row kernels on the GPU. Rows are moved one warp per row with 16-byte accesses where
// the width and pointers allow it (else element-wise); sums accumulate in float32.
#include "ep/cuda/kernels.h"

#include <cuda_bf16.h>

#include <algorithm>

namespace moerl::ep::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

int grid_for(int64_t warps_needed) {
  int64_t b = (warps_needed + kWarps - 1) / kWarps;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(b, 132 * 64)));
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// Row copy: dst[d_i] = src[s_i] where s_i = src_rows ? src_rows[i] : i (same for dst).
template <class V>
__global__ void copy_rows(const V* __restrict__ src, V* __restrict__ dst, int64_t width,
                          const int64_t* __restrict__ src_rows, const int64_t* __restrict__ dst_rows, int64_t n) {
  const int lane = threadIdx.x & 31;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32; i < n;
       i += static_cast<int64_t>(gridDim.x) * kWarps) {
    const V* s = src + (src_rows ? src_rows[i] : i) * width;
    V* d = dst + (dst_rows ? dst_rows[i] : i) * width;
    int64_t v = lane;
    for (; v + 96 < width; v += 128) {  // four independent 16-byte loads in flight per lane
      V a = s[v], b = s[v + 32], c = s[v + 64], e = s[v + 96];
      d[v] = a; d[v + 32] = b; d[v + 64] = c; d[v + 96] = e;
    }
    for (; v < width; v += 32) d[v] = s[v];
  }
}

cudaError_t launch_copy(const void* src, void* dst, int64_t row_bytes, const int64_t* src_rows,
                        const int64_t* dst_rows, int64_t n, cudaStream_t stream) {
  if (n <= 0 || row_bytes <= 0) return cudaSuccess;
  const int grid = grid_for(n);
  if (row_bytes % 16 == 0 && aligned16(src) && aligned16(dst)) {
    copy_rows<uint4><<<grid, kThreads, 0, stream>>>(static_cast<const uint4*>(src), static_cast<uint4*>(dst),
                                                     row_bytes / 16, src_rows, dst_rows, n);
  } else {
    copy_rows<unsigned char><<<grid, kThreads, 0, stream>>>(static_cast<const unsigned char*>(src),
                                                             static_cast<unsigned char*>(dst), row_bytes,
                                                             src_rows, dst_rows, n);
  }
  return cudaGetLastError();
}

// C consecutive elements <-> float. C = 8 uses one 16-byte access for bf16, two for f32.
template <class T, int C> struct Io;
template <> struct Io<__nv_bfloat16, 8> {
  __device__ static void load(const __nv_bfloat16* p, float* f) {
    uint4 u = *reinterpret_cast<const uint4*>(p);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
    for (int j = 0; j < 4; ++j) { float2 x = __bfloat1622float2(h[j]); f[2 * j] = x.x; f[2 * j + 1] = x.y; }
  }
  __device__ static void store(__nv_bfloat16* p, const float* f) {
    uint4 u;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
    for (int j = 0; j < 4; ++j) h[j] = __floats2bfloat162_rn(f[2 * j], f[2 * j + 1]);
    *reinterpret_cast<uint4*>(p) = u;
  }
};
template <> struct Io<float, 8> {
  __device__ static void load(const float* p, float* f) {
    float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
    f[0] = a.x; f[1] = a.y; f[2] = a.z; f[3] = a.w; f[4] = b.x; f[5] = b.y; f[6] = b.z; f[7] = b.w;
  }
  __device__ static void store(float* p, const float* f) {
    reinterpret_cast<float4*>(p)[0] = make_float4(f[0], f[1], f[2], f[3]);
    reinterpret_cast<float4*>(p)[1] = make_float4(f[4], f[5], f[6], f[7]);
  }
};
template <> struct Io<__nv_bfloat16, 1> {
  __device__ static void load(const __nv_bfloat16* p, float* f) { f[0] = __bfloat162float(*p); }
  __device__ static void store(__nv_bfloat16* p, const float* f) { *p = __float2bfloat16_rn(f[0]); }
};
template <> struct Io<float, 1> {
  __device__ static void load(const float* p, float* f) { f[0] = *p; }
  __device__ static void store(float* p, const float* f) { *p = f[0]; }
};

template <class T, int C>
__global__ void combine_kernel(const T* __restrict__ y, int64_t h, const int64_t* __restrict__ pos,
                               const float* __restrict__ w, int64_t T_, int64_t K, T* __restrict__ out) {
  const int lane = threadIdx.x & 31;
  const int64_t chunks = h / C;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32; t < T_;
       t += static_cast<int64_t>(gridDim.x) * kWarps) {
    for (int64_t c = lane; c < chunks; c += 32) {
      float acc[C], v[C];
#pragma unroll
      for (int j = 0; j < C; ++j) acc[j] = 0.f;
      for (int64_t k = 0; k < K; ++k) {
        const int64_t p = pos[t * K + k];
        if (p < 0) continue;
        const float wk = w ? w[t * K + k] : 1.f;
        Io<T, C>::load(y + p * h + c * C, v);
#pragma unroll
        for (int j = 0; j < C; ++j) acc[j] += wk * v[j];
      }
      Io<T, C>::store(out + t * h + c * C, acc);
    }
  }
}

template <class T, int C>
__global__ void gather_scaled_kernel(const T* __restrict__ src, int64_t h, const int64_t* __restrict__ rows,
                                     const float* __restrict__ scale, int64_t n, T* __restrict__ dst) {
  const int lane = threadIdx.x & 31;
  const int64_t chunks = h / C;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32; i < n;
       i += static_cast<int64_t>(gridDim.x) * kWarps) {
    const float s = scale[i];
    const T* a = src + rows[i] * h;
    for (int64_t c = lane; c < chunks; c += 32) {
      float v[C];
      Io<T, C>::load(a + c * C, v);
#pragma unroll
      for (int j = 0; j < C; ++j) v[j] *= s;
      Io<T, C>::store(dst + i * h + c * C, v);
    }
  }
}

template <class T, int C>
__global__ void row_dots_kernel(const T* __restrict__ a, const T* __restrict__ y, int64_t h,
                                const int64_t* __restrict__ pos, int64_t n_entries, int64_t K,
                                float* __restrict__ dots) {
  const int lane = threadIdx.x & 31;
  const int64_t chunks = h / C;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32; e < n_entries;
       e += static_cast<int64_t>(gridDim.x) * kWarps) {
    const int64_t p = pos[e];
    float acc = 0.f;
    if (p >= 0) {
      const T* ar = a + (e / K) * h;
      const T* yr = y + p * h;
      for (int64_t c = lane; c < chunks; c += 32) {
        float u[C], v[C];
        Io<T, C>::load(ar + c * C, u);
        Io<T, C>::load(yr + c * C, v);
#pragma unroll
        for (int j = 0; j < C; ++j) acc += u[j] * v[j];
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) dots[e] = acc;
  }
}

template <class T>
__global__ void accumulate_kernel(const T* __restrict__ rows, int64_t h, const int64_t* __restrict__ token,
                                  int64_t n, float* __restrict__ acc) {
  const int lane = threadIdx.x & 31;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32; i < n;
       i += static_cast<int64_t>(gridDim.x) * kWarps) {
    float* a = acc + token[i] * h;
    const T* r = rows + i * h;
    for (int64_t j = lane; j < h; j += 32) {
      float v;
      Io<T, 1>::load(r + j, &v);
      atomicAdd(a + j, v);
    }
  }
}

__global__ void layout_kernel(const int64_t* __restrict__ idx, int64_t T_, int64_t K, int64_t E, int R,
                              unsigned long long* per_rank, unsigned long long* per_expert, bool* in_rank,
                              unsigned long long* num_bad) {
  const int64_t per = E / R;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < T_;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    bool* row = in_rank + t * R;
    for (int r = 0; r < R; ++r) row[r] = false;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t e = idx[t * K + k];
      if (e == -1) continue;
      if (e < -1 || e >= E) { atomicAdd(num_bad, 1ull); continue; }
      atomicAdd(per_expert + e, 1ull);
      row[e / per] = true;
    }
    for (int r = 0; r < R; ++r)
      if (row[r]) atomicAdd(per_rank + r, 1ull);
  }
}


}  // namespace

cudaError_t compute_layout(const int64_t* topk_idx, int64_t num_tokens, int64_t topk, int64_t num_experts,
                           int num_ranks, int64_t* per_rank, int64_t* per_expert, bool* in_rank,
                           int64_t* num_bad, cudaStream_t stream) {
  cudaError_t err;
  if ((err = cudaMemsetAsync(per_rank, 0, sizeof(int64_t) * num_ranks, stream))) return err;
  if ((err = cudaMemsetAsync(per_expert, 0, sizeof(int64_t) * num_experts, stream))) return err;
  if ((err = cudaMemsetAsync(num_bad, 0, sizeof(int64_t), stream))) return err;
  if (num_tokens == 0) return cudaSuccess;
  const int grid = static_cast<int>(std::min<int64_t>((num_tokens + kThreads - 1) / kThreads, 132 * 16));
  layout_kernel<<<grid, kThreads, 0, stream>>>(topk_idx, num_tokens, topk, num_experts, num_ranks,
                                                reinterpret_cast<unsigned long long*>(per_rank),
                                                reinterpret_cast<unsigned long long*>(per_expert), in_rank,
                                                reinterpret_cast<unsigned long long*>(num_bad));
  return cudaGetLastError();
}

cudaError_t gather_rows(const void* src, int64_t row_bytes, const int64_t* rows, int64_t n, void* dst,
                        cudaStream_t stream) {
  return launch_copy(src, dst, row_bytes, rows, nullptr, n, stream);
}

cudaError_t scatter_rows(const void* src, int64_t row_bytes, const int64_t* rows, int64_t n, void* dst,
                         cudaStream_t stream) {
  return launch_copy(src, dst, row_bytes, nullptr, rows, n, stream);
}

#define MOERL_EP_DISPATCH_TYPE(dtype, ...)                      \
  do {                                                          \
    if ((dtype) == DType::kBFloat16) {                          \
      using T = __nv_bfloat16;                                  \
      __VA_ARGS__;                                              \
    } else {                                                    \
      using T = float;                                          \
      __VA_ARGS__;                                              \
    }                                                           \
  } while (0)

cudaError_t gather_rows_scaled(const void* src, DType dtype, int64_t h, const int64_t* rows,
                               const float* scale, int64_t n, void* dst, cudaStream_t stream) {
  if (n <= 0 || h <= 0) return cudaSuccess;
  const bool vec = h % 8 == 0 && aligned16(src) && aligned16(dst);
  MOERL_EP_DISPATCH_TYPE(dtype, {
    if (vec)
      gather_scaled_kernel<T, 8><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const T*>(src), h, rows, scale,
                                                                       n, static_cast<T*>(dst));
    else
      gather_scaled_kernel<T, 1><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const T*>(src), h, rows, scale,
                                                                       n, static_cast<T*>(dst));
  });
  return cudaGetLastError();
}

cudaError_t accumulate_rows(const void* rows, DType dtype, int64_t h, const int64_t* token, int64_t n,
                            float* acc, cudaStream_t stream) {
  if (n <= 0 || h <= 0) return cudaSuccess;
  MOERL_EP_DISPATCH_TYPE(dtype, {
    accumulate_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const T*>(rows), h, token, n, acc);
  });
  return cudaGetLastError();
}

cudaError_t weighted_combine(const void* y, DType dtype, int64_t h, const int64_t* pos_TK, const float* w_TK,
                             int64_t num_tokens, int64_t topk, void* out, cudaStream_t stream) {
  if (num_tokens <= 0 || h <= 0) return cudaSuccess;
  const bool vec = h % 8 == 0 && aligned16(y) && aligned16(out);
  MOERL_EP_DISPATCH_TYPE(dtype, {
    if (vec)
      combine_kernel<T, 8><<<grid_for(num_tokens), kThreads, 0, stream>>>(static_cast<const T*>(y), h, pos_TK, w_TK,
                                                                          num_tokens, topk, static_cast<T*>(out));
    else
      combine_kernel<T, 1><<<grid_for(num_tokens), kThreads, 0, stream>>>(static_cast<const T*>(y), h, pos_TK, w_TK,
                                                                          num_tokens, topk, static_cast<T*>(out));
  });
  return cudaGetLastError();
}

cudaError_t row_dots(const void* a, const void* y, DType dtype, int64_t h, const int64_t* pos_TK,
                     int64_t num_tokens, int64_t topk, float* dots, cudaStream_t stream) {
  const int64_t n = num_tokens * topk;
  if (n <= 0) return cudaSuccess;
  const bool vec = h % 8 == 0 && aligned16(a) && aligned16(y);
  MOERL_EP_DISPATCH_TYPE(dtype, {
    if (vec)
      row_dots_kernel<T, 8><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const T*>(a), static_cast<const T*>(y),
                                                                  h, pos_TK, n, topk, dots);
    else
      row_dots_kernel<T, 1><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const T*>(a), static_cast<const T*>(y),
                                                                  h, pos_TK, n, topk, dots);
  });
  return cudaGetLastError();
}

}  // namespace moerl::ep::cuda
