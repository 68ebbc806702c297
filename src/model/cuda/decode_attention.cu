// decode_attention: see decode_attention.h. One CTA of 4 warps per (row, KV head); positions
// in chunks of kChunk:
//   1. scores: q [G x D] against the chunk's keys with mma.m16n8k16 (the G query heads as the
//      A rows, 8 positions as the B columns; each lane loads 8 consecutive d of a row, the
//      same permutation of d on both sides as in expert_gemm.cu), scaled and masked, into
//      shared memory as float32 [position][head];
//   2. per head: the running max, probabilities exp(s - max) in place, the running sum and
//      the factor that rescales what earlier chunks accumulated (online softmax);
//   3. values: each lane owns 4 d of every head and each warp a stride of positions,
//      accumulating prob x v in float32; at the end the warps' sums are added (shared memory)
//      and divided by the head's sum.
#include "model/cuda/decode_attention.h"

#include <cuda_bf16.h>

#include <cmath>

#include "model/cuda/mma.cuh"

namespace moerl::model::cuda {
namespace {

constexpr int kD = 128, kMaxG = 8, kThreads = 128, kChunk = 256;

// Rows 8..15 of A are zero: at most 8 query heads per KV head.
__device__ __forceinline__ void mma(float* c, uint32_t a0, uint32_t a2, uint32_t b0, uint32_t b1) {
  detail::mma_m16n8k16(c, a0, 0u, a2, 0u, b0, b1);
}

__device__ __forceinline__ void unpack4(const uint2& u, float* f) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float2 v = __bfloat1622float2(h[i]);
    f[2 * i] = v.x;
    f[2 * i + 1] = v.y;
  }
}

__global__ void __launch_bounds__(kThreads)
    decode_attention_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ kc,
                            const __nv_bfloat16* __restrict__ vc, const bool* __restrict__ valid,
                            const int64_t* __restrict__ last, int G, int Hkv, int64_t capacity, float scale,
                            __nv_bfloat16* __restrict__ out) {
  __shared__ __align__(16) float sc[kChunk][kMaxG];           // scores, then probabilities
  __shared__ __align__(16) float part[3][32][kMaxG * 4];  // warps 1..3's sums at the end
  __shared__ float m_s[kMaxG], l_s[kMaxG], alpha_s[kMaxG];
  const int b = blockIdx.x / Hkv, kvh = blockIdx.x % Hkv;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int64_t head0 = static_cast<int64_t>(b) * Hkv * G + static_cast<int64_t>(kvh) * G;
  const __nv_bfloat16* kb = kc + (static_cast<int64_t>(b) * Hkv + kvh) * capacity * kD;
  const __nv_bfloat16* vb = vc + (static_cast<int64_t>(b) * Hkv + kvh) * capacity * kD;
  const bool* ok = valid + static_cast<int64_t>(b) * capacity;
  // Positions past the row's last slot hold nothing valid: neither read nor scored.
  const int64_t S = last == nullptr ? capacity : min(capacity, last[b] + 1);

  uint4 qf[kD / 32];  // A fragments: row g = query head g of this KV head
#pragma unroll
  for (int i = 0; i < kD / 32; ++i)
    qf[i] = g < G ? *reinterpret_cast<const uint4*>(q + (head0 + g) * kD + 32 * i + 8 * t) : make_uint4(0, 0, 0, 0);
  if (tid < kMaxG) {
    m_s[tid] = -INFINITY;
    l_s[tid] = 0.f;
  }
  // 3.: lane l owns d 4l..4l+3 of every head, warp w the positions w, w + 4, ...
  float acc[kMaxG][4];
#pragma unroll
  for (int h = 0; h < kMaxG; ++h)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[h][e] = 0.f;

  for (int64_t c0 = 0; c0 < S; c0 += kChunk) {
    const int n = static_cast<int>(S - c0 < kChunk ? S - c0 : kChunk);
    for (int tile = warp; tile * 8 < n; tile += kThreads / 32) {  // 1. scores
      const int64_t p = c0 + tile * 8 + g;
      float c[4] = {0.f, 0.f, 0.f, 0.f};
      uint4 kr[kD / 32];
#pragma unroll
      for (int i = 0; i < kD / 32; ++i)
        kr[i] = p < S ? __ldcs(reinterpret_cast<const uint4*>(kb + p * kD + 32 * i + 8 * t)) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int i = 0; i < kD / 32; ++i) {
        mma(c, qf[i].x, qf[i].y, kr[i].x, kr[i].y);
        mma(c, qf[i].z, qf[i].w, kr[i].z, kr[i].w);
      }
      if (g < G) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int pos = tile * 8 + 2 * t + j;
          sc[pos][g] = pos < n && ok[c0 + pos] ? c[j] * scale : -INFINITY;
        }
      }
    }
    __syncthreads();
    {  // 2. softmax bookkeeping: 16 threads per head
      const int h = tid >> 4, j = tid & 15;
      float mx = -INFINITY;
      if (h < G)
        for (int p = j; p < n; p += 16) mx = fmaxf(mx, sc[p][h]);
#pragma unroll
      for (int o = 8; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      const float m_old = h < G ? m_s[h] : -INFINITY, m_new = fmaxf(m_old, mx);
      float sum = 0.f;
      if (h < G) {
        for (int p = j; p < n; p += 16) {
          const float e = m_new == -INFINITY ? 0.f : __expf(sc[p][h] - m_new);
          sc[p][h] = e;
          sum += e;
        }
      }
#pragma unroll
      for (int o = 8; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      __syncwarp();
      if (j == 0 && h < G) {
        const float alpha = m_old == -INFINITY ? 0.f : __expf(m_old - m_new);
        alpha_s[h] = alpha;
        l_s[h] = l_s[h] * alpha + sum;
        m_s[h] = m_new;
      }
    }
    __syncthreads();
    float pr[kMaxG];  // 3. values
#pragma unroll
    for (int h = 0; h < kMaxG; ++h) {
      const float a = h < G ? alpha_s[h] : 0.f;
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[h][e] *= a;
    }
#pragma unroll 4
    for (int p = warp; p < n; p += kThreads / 32) {
      float v[4];
      unpack4(__ldcs(reinterpret_cast<const uint2*>(vb + (c0 + p) * kD + 4 * lane)), v);
      const float4 p0 = *reinterpret_cast<const float4*>(&sc[p][0]), p1 = *reinterpret_cast<const float4*>(&sc[p][4]);
      pr[0] = p0.x, pr[1] = p0.y, pr[2] = p0.z, pr[3] = p0.w, pr[4] = p1.x, pr[5] = p1.y, pr[6] = p1.z, pr[7] = p1.w;
#pragma unroll
      for (int h = 0; h < kMaxG; ++h)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[h][e] += (h < G ? pr[h] : 0.f) * v[e];
    }
    __syncthreads();  // sc is rewritten by the next chunk
  }
  // The 4 warps' position strides summed.
  if (warp > 0) {
#pragma unroll
    for (int h = 0; h < kMaxG; ++h)
#pragma unroll
      for (int e = 0; e < 4; ++e) part[warp - 1][lane][h * 4 + e] = acc[h][e];
  }
  __syncthreads();
  if (warp == 0) {
#pragma unroll
    for (int h = 0; h < kMaxG; ++h) {
      if (h >= G) break;
      const float inv = l_s[h] > 0.f ? 1.f / l_s[h] : 0.f;
      __align__(8) __nv_bfloat16 o[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float s = acc[h][e] + part[0][lane][h * 4 + e] + part[1][lane][h * 4 + e] + part[2][lane][h * 4 + e];
        o[e] = __float2bfloat16_rn(s * inv);
      }
      *reinterpret_cast<uint2*>(out + (head0 + h) * kD + 4 * lane) = *reinterpret_cast<const uint2*>(o);
    }
  }
}

}  // namespace

bool decode_attention_fits(int64_t num_heads, int64_t num_kv_heads, int64_t head_dim) {
  return head_dim == kD && num_kv_heads > 0 && num_heads % num_kv_heads == 0 && num_heads / num_kv_heads >= 1 &&
         num_heads / num_kv_heads <= kMaxG;
}

cudaError_t decode_attention(const void* q, const void* k_cache, const void* v_cache, const bool* valid,
                             const int64_t* last_slot, int64_t batch, int64_t num_heads, int64_t num_kv_heads,
                             int64_t positions, int64_t head_dim, float scale, void* out, cudaStream_t stream) {
  if (!decode_attention_fits(num_heads, num_kv_heads, head_dim) || batch < 1 || positions < 1 ||
      batch * num_kv_heads > 0x7fffffff) {
    return cudaErrorInvalidValue;
  }
  decode_attention_kernel<<<static_cast<unsigned>(batch * num_kv_heads), kThreads, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(q), static_cast<const __nv_bfloat16*>(k_cache),
      static_cast<const __nv_bfloat16*>(v_cache), valid, last_slot, static_cast<int>(num_heads / num_kv_heads),
      static_cast<int>(num_kv_heads), positions, scale, static_cast<__nv_bfloat16*>(out));
  return cudaGetLastError();
}

}  // namespace moerl::model::cuda
