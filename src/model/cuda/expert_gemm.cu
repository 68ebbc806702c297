// expert_gemm: see expert_gemm.h; fragment layouts in model/cuda/mma.cuh. Each lane loads 8
// consecutive k (16 bytes) of a row: its first four serve as logical k {2t, 2t+1, 2t+8, 2t+9}
// of one mma, its last four as the same of the next, and A and B use the same assignment, so
// each k16 step still sums 16 distinct k.
#include "model/cuda/expert_gemm.h"

#include <cuda_bf16.h>

#include "model/cuda/mma.cuh"

namespace moerl::model::cuda {
namespace {

using detail::mma_m16n8k16;

constexpr int kWarps = 4;      // per CTA
constexpr int kTiles = 4;      // n8 tiles per warp (swiglu: 2 gate + the 2 matching up tiles)
constexpr int kKStep = 64;     // k per loop iteration: two 16-byte loads per lane and row

__device__ __forceinline__ float round_bf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

__device__ __forceinline__ void store2(__nv_bfloat16* p, float x, float y) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(x, y);
}

// One pass over up to 16 * MT rows [r0, r_end) of one expert for this warp's kTiles tiles.
template <int MT, bool SWIGLU>
__device__ __forceinline__ void pass(const __nv_bfloat16* __restrict__ a, const int64_t* __restrict__ a_rows,
                                     const __nv_bfloat16* const (&wp)[kTiles], int64_t r0, int64_t r_end, int64_t k,
                                     int64_t n_out, int64_t col0, __nv_bfloat16* __restrict__ out) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const __nv_bfloat16* ap[MT][2];
  bool ok[MT][2];
#pragma unroll
  for (int m = 0; m < MT; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = r0 + 16 * m + 8 * h + g;
      ok[m][h] = r < r_end;
      ap[m][h] = a + (ok[m][h] ? (a_rows ? a_rows[r] : r) : 0) * k + 8 * t;
    }
  }
  float acc[MT][kTiles][4];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int j = 0; j < kTiles; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[m][j][q] = 0.f;

  for (int64_t kb = 0; kb < k; kb += kKStep) {
    uint4 wv[2][kTiles], av[2][MT][2];
#pragma unroll
    for (int u = 0; u < 2; ++u)
#pragma unroll
      for (int j = 0; j < kTiles; ++j) wv[u][j] = __ldcs(reinterpret_cast<const uint4*>(wp[j] + kb + 32 * u));
#pragma unroll
    for (int u = 0; u < 2; ++u)
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          av[u][m][h] =
              ok[m][h] ? __ldg(reinterpret_cast<const uint4*>(ap[m][h] + kb + 32 * u)) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < 2; ++u)
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int j = 0; j < kTiles; ++j) {
          const uint4 &lo = av[u][m][0], &hi = av[u][m][1], &w = wv[u][j];
          mma_m16n8k16(acc[m][j], lo.x, hi.x, lo.y, hi.y, w.x, w.y);
          mma_m16n8k16(acc[m][j], lo.z, hi.z, lo.w, hi.w, w.z, w.w);
        }
  }

#pragma unroll
  for (int m = 0; m < MT; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = r0 + 16 * m + 8 * h + g;
      if (r >= r_end) continue;
      if constexpr (SWIGLU) {
        // As the unfused path: gate and up rounded to bf16, silu(gate) * up in float32.
#pragma unroll
        for (int j = 0; j < kTiles / 2; ++j) {
          float o[2];
#pragma unroll
          for (int q = 0; q < 2; ++q) {
            const float gt = round_bf16(acc[m][j][2 * h + q]), up = round_bf16(acc[m][j + kTiles / 2][2 * h + q]);
            o[q] = gt / (1.f + __expf(-gt)) * up;
          }
          store2(out + r * n_out + col0 + 8 * j + 2 * t, o[0], o[1]);
        }
      } else {
#pragma unroll
        for (int j = 0; j < kTiles; ++j)
          store2(out + r * n_out + col0 + 8 * j + 2 * t, acc[m][j][2 * h], acc[m][j][2 * h + 1]);
      }
    }
  }
}

// blockIdx.y: expert; blockIdx.x: a block of kWarps * cols output columns (cols = 8 *
// kTiles, or 8 * kTiles / 2 with swiglu), one slice of cols per warp.
template <bool SWIGLU>
__global__ void __launch_bounds__(kWarps * 32, 3)
    expert_gemm_kernel(const __nv_bfloat16* __restrict__ a, const int64_t* __restrict__ a_rows,
                       const __nv_bfloat16* __restrict__ w, const int32_t* __restrict__ offs, int64_t n_out, int64_t k,
                       __nv_bfloat16* __restrict__ out) {
  constexpr int cols = SWIGLU ? 8 * kTiles / 2 : 8 * kTiles;
  const int e = blockIdx.y;
  const int64_t begin = e == 0 ? 0 : offs[e - 1], end = offs[e];
  const int64_t col0 = (static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32) * cols;
  if (begin >= end || col0 >= n_out) return;  // no rows: the expert's weights are not read
  const int64_t n_w = SWIGLU ? 2 * n_out : n_out;
  const __nv_bfloat16* we = w + static_cast<int64_t>(e) * n_w * k + (threadIdx.x & 31) / 4 * k + 8 * (threadIdx.x & 3);
  const __nv_bfloat16* wp[kTiles];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
    const int64_t row = SWIGLU ? (j < kTiles / 2 ? col0 + 8 * j : n_out + col0 + 8 * (j - kTiles / 2)) : col0 + 8 * j;
    wp[j] = we + row * k;
  }
  for (int64_t r0 = begin; r0 < end; r0 += 32) {
    if (end - r0 <= 16) {
      pass<1, SWIGLU>(a, a_rows, wp, r0, end, k, n_out, col0, out);
    } else {
      pass<2, SWIGLU>(a, a_rows, wp, r0, end < r0 + 32 ? end : r0 + 32, k, n_out, col0, out);
    }
  }
}

// One CTA of kPlanThreads: rows per expert counted with shared-memory atomics, a block scan
// for the group ends, then each entry's row. Rows within a group come in the atomics' order;
// expert_gemm computes every row on its own and weighted_combine sums a token's entries in k
// order, so the products do not depend on that order.
constexpr int kPlanThreads = 1024;

template <class W>
__global__ void __launch_bounds__(kPlanThreads)
    plan_kernel(const int64_t* __restrict__ idx, const W* __restrict__ w_in, int64_t m, int k, int experts,
                int32_t* __restrict__ offs, int64_t* __restrict__ src, int64_t* __restrict__ pos,
                float* __restrict__ w_out) {
  __shared__ int count[kPlanThreads], start[kPlanThreads], warp_sum[kPlanThreads / 32];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  count[tid] = 0;
  __syncthreads();
  for (int64_t i = tid; i < m; i += kPlanThreads) {  // pos holds the slot inside the group for now
    const int64_t e = idx[i];
    pos[i] = e >= 0 && e < experts ? atomicAdd(&count[e], 1) : -1;
  }
  __syncthreads();
  int v = count[tid];  // inclusive scan over the experts: in each warp, then over the warps
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int n = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += n;
  }
  if (lane == 31) warp_sum[warp] = v;
  __syncthreads();
  if (warp == 0) {
    int s = warp_sum[lane];
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int n = __shfl_up_sync(0xffffffffu, s, o);
      if (lane >= o) s += n;
    }
    warp_sum[lane] = s;
  }
  __syncthreads();
  if (warp > 0) v += warp_sum[warp - 1];
  start[tid] = v - count[tid];
  if (tid < experts) offs[tid] = v;
  __syncthreads();
  for (int64_t i = tid; i < m; i += kPlanThreads) {
    const int64_t slot = pos[i];
    if (slot < 0) {
      pos[i] = -1;
      w_out[i] = 0.f;
      continue;
    }
    const int64_t row = start[idx[i]] + slot;
    pos[i] = row;
    src[row] = i / k;
    w_out[i] = static_cast<float>(w_in[i]);
  }
}

}  // namespace

cudaError_t expert_plan(const int64_t* idx, const void* weight, bool weight_bf16, int64_t tokens, int64_t k,
                        int64_t experts, int32_t* offs, int64_t* src_token, int64_t* pos, float* weight_f32,
                        cudaStream_t stream) {
  if (experts < 1 || experts > kExpertPlanMaxExperts || k < 1 || tokens < 0) return cudaErrorInvalidValue;
  const int64_t m = tokens * k;
  if (weight_bf16) {
    plan_kernel<<<1, kPlanThreads, 0, stream>>>(idx, static_cast<const __nv_bfloat16*>(weight), m, static_cast<int>(k),
                                                static_cast<int>(experts), offs, src_token, pos, weight_f32);
  } else {
    plan_kernel<<<1, kPlanThreads, 0, stream>>>(idx, static_cast<const float*>(weight), m, static_cast<int>(k),
                                                static_cast<int>(experts), offs, src_token, pos, weight_f32);
  }
  return cudaGetLastError();
}

bool expert_gemm_fits(int64_t n_out, int64_t k, bool swiglu) {
  return k > 0 && k % kKStep == 0 && n_out > 0 && n_out % (swiglu ? 8 * kTiles / 2 : 8 * kTiles) == 0;
}

cudaError_t expert_gemm(const void* a, const int64_t* a_rows, const void* w, const int32_t* offs, int64_t experts,
                        int64_t n_out, int64_t k, bool swiglu, void* out, cudaStream_t stream) {
  if (!expert_gemm_fits(n_out, k, swiglu) || experts < 1 || experts > 65535) return cudaErrorInvalidValue;
  const int64_t per_cta = kWarps * (swiglu ? 8 * kTiles / 2 : 8 * kTiles);
  const dim3 grid(static_cast<unsigned>((n_out + per_cta - 1) / per_cta), static_cast<unsigned>(experts));
  auto* A = static_cast<const __nv_bfloat16*>(a);
  auto* W = static_cast<const __nv_bfloat16*>(w);
  auto* O = static_cast<__nv_bfloat16*>(out);
  if (swiglu) {
    expert_gemm_kernel<true><<<grid, kWarps * 32, 0, stream>>>(A, a_rows, W, offs, n_out, k, O);
  } else {
    expert_gemm_kernel<false><<<grid, kWarps * 32, 0, stream>>>(A, a_rows, W, offs, n_out, k, O);
  }
  return cudaGetLastError();
}

}  // namespace moerl::model::cuda
