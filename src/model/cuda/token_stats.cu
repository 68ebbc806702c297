// Fused next-token statistics: one block per row reads the logits once. The forward keeps an
// online (max m, s = sum e^(x-m), a = sum e^(x-m) (x-m)) per thread and merges them, so
// lse = m + log s and the entropy is log s - a / s; the backward writes each logit's gradient
// over the logit. 8 elements per 16-byte access when the row allows it; math in float32.
#include <cuda_bf16.h>

#include <cmath>

#include "model/cuda/packed_io.cuh"
#include "model/cuda/token_stats_kernels.h"

namespace moerl::model::cuda {
namespace {

constexpr int kThreads = 512;

using namespace detail;  // NOLINT: the shared load/store helpers

struct Online {
  float m = -INFINITY, s = 0.f, a = 0.f;

  __device__ void push(float x) {
    if (s == 0.f) {
      m = x;
      s = 1.f;
      a = 0.f;
      return;
    }
    if (x > m) {  // rescale to the new max: x - m' = (x - m) + (m - m')
      const float f = expf(m - x);
      a = f * (a + s * (m - x));
      s *= f;
      m = x;
    }
    const float e = expf(x - m);
    s += e;
    a += e * (x - m);
  }
  __device__ void merge(const Online& o) {
    if (o.s == 0.f) return;
    if (s == 0.f) {
      *this = o;
      return;
    }
    const float M = fmaxf(m, o.m), f1 = expf(m - M), f2 = expf(o.m - M);
    a = f1 * (a + s * (m - M)) + f2 * (o.a + o.s * (o.m - M));
    s = s * f1 + o.s * f2;
    m = M;
  }
};

// Lane 0 ends with the merge of the warp's 32 states.
__device__ Online warp_reduce(Online v) {
  for (int d = 16; d > 0; d >>= 1) {
    Online o;
    o.m = __shfl_down_sync(0xffffffffu, v.m, d);
    o.s = __shfl_down_sync(0xffffffffu, v.s, d);
    o.a = __shfl_down_sync(0xffffffffu, v.a, d);
    v.merge(o);
  }
  return v;
}

__device__ Online block_reduce(Online v) {
  __shared__ float sm[32], ss[32], sa[32];
  v = warp_reduce(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    sm[warp] = v.m;
    ss[warp] = v.s;
    sa[warp] = v.a;
  }
  __syncthreads();
  Online r;
  if (warp == 0) {
    if (lane < static_cast<int>(blockDim.x / 32)) {
      r.m = sm[lane];
      r.s = ss[lane];
      r.a = sa[lane];
    }
    r = warp_reduce(r);
  }
  return r;  // valid in thread 0
}

template <class T, int C>
__global__ void stats_fwd(const T* __restrict__ z, int64_t V, const int64_t* __restrict__ targets, float inv_t,
                          float* __restrict__ logp, float* __restrict__ ent, float* __restrict__ lse) {
  const int64_t row = blockIdx.x;
  const T* zr = z + row * V;
  Online acc;
  for (int64_t c = static_cast<int64_t>(threadIdx.x) * C; c < V; c += static_cast<int64_t>(blockDim.x) * C) {
    const Pack<T, C> pk = *reinterpret_cast<const Pack<T, C>*>(zr + c);
#pragma unroll
    for (int j = 0; j < C; ++j) acc.push(to_f(pk.v[j]) * inv_t);
  }
  const Online r = block_reduce(acc);
  if (threadIdx.x == 0) {
    const float L = r.m + logf(r.s);
    lse[row] = L;
    logp[row] = to_f(zr[targets[row]]) * inv_t - L;
    if (ent != nullptr) ent[row] = logf(r.s) - r.a / r.s;
  }
}

template <class T, int C>
__global__ void stats_bwd(T* __restrict__ z, int64_t V, const int64_t* __restrict__ targets,
                          const float* __restrict__ lse, const float* __restrict__ g_logp,
                          const float* __restrict__ g_ent, const float* __restrict__ ent, float inv_t) {
  const int64_t row = blockIdx.x;
  T* zr = z + row * V;
  const float L = lse[row], g = g_logp[row];
  const float ge = g_ent != nullptr ? g_ent[row] : 0.f, H = ent != nullptr ? ent[row] : 0.f;
  const int64_t t = targets[row];
  for (int64_t c = static_cast<int64_t>(threadIdx.x) * C; c < V; c += static_cast<int64_t>(blockDim.x) * C) {
    Pack<T, C> pk = *reinterpret_cast<const Pack<T, C>*>(zr + c);
#pragma unroll
    for (int j = 0; j < C; ++j) {
      const float lp = to_f(pk.v[j]) * inv_t - L;
      float d = -expf(lp) * (g + ge * (lp + H));
      if (c + j == t) d += g;
      pk.v[j] = from_f<T>(d * inv_t);
    }
    *reinterpret_cast<Pack<T, C>*>(zr + c) = pk;
  }
}

// C elements of every row load as one 16-byte access: rows of a multiple of C, base aligned.
template <class T>
constexpr int kPack = 16 / sizeof(T);
template <class T>
bool vectorizable(const void* p, int64_t V) {
  return V % kPack<T> == 0 && reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

template <class T>
cudaError_t run_fwd(const void* z, int64_t rows, int64_t V, const int64_t* targets, float inv_t, float* logp,
                    float* ent, float* lse, cudaStream_t s) {
  const T* zt = static_cast<const T*>(z);
  if (vectorizable<T>(z, V)) {
    stats_fwd<T, kPack<T> ><<<static_cast<unsigned>(rows), kThreads, 0, s>>>(zt, V, targets, inv_t, logp, ent, lse);
  } else {
    stats_fwd<T, 1><<<static_cast<unsigned>(rows), kThreads, 0, s>>>(zt, V, targets, inv_t, logp, ent, lse);
  }
  return cudaGetLastError();
}

template <class T>
cudaError_t run_bwd(void* z, int64_t rows, int64_t V, const int64_t* targets, const float* lse, const float* g,
                    const float* ge, const float* ent, float inv_t, cudaStream_t s) {
  T* zt = static_cast<T*>(z);
  if (vectorizable<T>(z, V)) {
    stats_bwd<T, kPack<T> ><<<static_cast<unsigned>(rows), kThreads, 0, s>>>(zt, V, targets, lse, g, ge, ent, inv_t);
  } else {
    stats_bwd<T, 1><<<static_cast<unsigned>(rows), kThreads, 0, s>>>(zt, V, targets, lse, g, ge, ent, inv_t);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t token_stats_forward(const void* z, int64_t rows, int64_t vocab, bool bf16, const int64_t* targets,
                                float inv_t, float* logp, float* ent, float* lse, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  return bf16 ? run_fwd<__nv_bfloat16>(z, rows, vocab, targets, inv_t, logp, ent, lse, stream)
              : run_fwd<float>(z, rows, vocab, targets, inv_t, logp, ent, lse, stream);
}

cudaError_t token_stats_backward(void* z, int64_t rows, int64_t vocab, bool bf16, const int64_t* targets,
                                 const float* lse, const float* g_logp, const float* g_ent, const float* ent,
                                 float inv_t, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  return bf16 ? run_bwd<__nv_bfloat16>(z, rows, vocab, targets, lse, g_logp, g_ent, ent, inv_t, stream)
              : run_bwd<float>(z, rows, vocab, targets, lse, g_logp, g_ent, ent, inv_t, stream);
}

}  // namespace moerl::model::cuda
