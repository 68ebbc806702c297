// sample_rows: see sample_rows.h. One CTA of kThreads per row. Each thread walks its stride of
// the row four values at a time (one Philox call per four), keeping an online log-sum-exp at
// temperature 1 and at T (max and rescaled sum) and its best (value, index) of x + g (or x
// when greedy); warps merge by shuffles, then warp 0 merges the warps' partials.
#include "model/cuda/sample_rows.h"

#include <climits>
#include <cmath>
#include <cstdint>

namespace moerl::model::cuda {
namespace {

constexpr int kThreads = 512, kWarps = kThreads / 32;

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011).
__device__ __forceinline__ uint4 philox(uint4 c, uint2 k) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    const uint32_t hi0 = __umulhi(kM0, c.x), lo0 = kM0 * c.x, hi1 = __umulhi(kM1, c.z), lo1 = kM1 * c.z;
    c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
    k.x += kW0;
    k.y += kW1;
  }
  return c;
}

// Gumbel noise from 32 random bits: u = (top 23 bits + 0.5) / 2^23, strictly inside (0, 1) in
// float32 (with 24 bits, (2^24 - 1 + 0.5) rounds to 2^24: u = 1 and the noise is +inf).
__device__ __forceinline__ float gumbel(uint32_t bits) {
  const float u = (static_cast<float>(bits >> 9) + 0.5f) * (1.0f / 8388608.0f);
  return -logf(-logf(u));
}

// A running log-sum-exp: max m and sum s of exp(x - m).
struct Lse {
  float m = -INFINITY, s = 0.f;
  __device__ __forceinline__ void add(float x) {
    if (x == -INFINITY) return;
    if (x > m) {
      s = s * expf(m - x) + 1.f;
      m = x;
    } else {
      s += expf(x - m);
    }
  }
  __device__ __forceinline__ void merge(float om, float os) {
    if (om == -INFINITY) return;
    if (m == -INFINITY) {
      m = om;
      s = os;
      return;
    }
    const float nm = fmaxf(m, om);
    s = s * expf(m - nm) + os * expf(om - nm);
    m = nm;
  }
  __device__ __forceinline__ float value() const { return m + logf(s); }
};

// The best (value, index): a larger value, or the same value at a smaller index.
struct Best {
  float v = -INFINITY;
  int i = INT_MAX;
  __device__ __forceinline__ void take(float ov, int oi) {
    if (ov > v || (ov == v && oi < i)) {
      v = ov;
      i = oi;
    }
  }
};

struct Partial {
  Lse lse, lse_t;
  Best best;
  __device__ __forceinline__ void merge_from_lane(int mask) {
    const float m = __shfl_xor_sync(0xffffffffu, lse.m, mask), s = __shfl_xor_sync(0xffffffffu, lse.s, mask);
    const float mt = __shfl_xor_sync(0xffffffffu, lse_t.m, mask), st = __shfl_xor_sync(0xffffffffu, lse_t.s, mask);
    const float bv = __shfl_xor_sync(0xffffffffu, best.v, mask);
    const int bi = __shfl_xor_sync(0xffffffffu, best.i, mask);
    lse.merge(m, s);
    lse_t.merge(mt, st);
    best.take(bv, bi);
  }
  __device__ __forceinline__ void merge_warp() {
#pragma unroll
    for (int mask = 16; mask > 0; mask >>= 1) merge_from_lane(mask);
  }
};

__global__ void __launch_bounds__(kThreads)
    sample_rows_kernel(const float* __restrict__ logits, int V, bool greedy, float inv_t, uint2 key, uint32_t draw_lo,
                       uint32_t draw_hi, int64_t* __restrict__ token, float* __restrict__ logprob,
                       float* __restrict__ sample_logprob) {
  __shared__ float sh_f[kWarps][5];
  __shared__ int sh_i[kWarps];
  const int row = blockIdx.x;
  const float* x = logits + static_cast<int64_t>(row) * V;
  const bool unit_t = inv_t == 1.f;
  Partial p;
  auto visit = [&](float xv, int v, uint32_t bits) {
    p.lse.add(xv);
    if (greedy) {
      if (xv != -INFINITY) p.best.take(xv, v);
      return;
    }
    const float y = xv * inv_t;
    if (!unit_t) p.lse_t.add(y);
    if (xv != -INFINITY) p.best.take(y + gumbel(bits), v);
  };
  // Four values per step where the row is 16-byte aligned (V % 4 == 0), else one at a time;
  // value v always takes output v % 4 of Philox counter v / 4.
  const bool vec = (V & 3) == 0 && (reinterpret_cast<uintptr_t>(logits) & 15) == 0;
  const int groups = (V + 3) / 4;
  for (int q = threadIdx.x; q < groups; q += kThreads) {
    const uint4 r =
        greedy ? make_uint4(0, 0, 0, 0) : philox(make_uint4(q, static_cast<uint32_t>(row), draw_lo, draw_hi), key);
    const uint32_t bits[4] = {r.x, r.y, r.z, r.w};
    if (vec) {
      const float4 f = __ldcs(reinterpret_cast<const float4*>(x) + q);
      const float xs[4] = {f.x, f.y, f.z, f.w};
#pragma unroll
      for (int k = 0; k < 4; ++k) visit(xs[k], 4 * q + k, bits[k]);
    } else {
      for (int k = 0; k < 4 && 4 * q + k < V; ++k) visit(__ldcs(x + 4 * q + k), 4 * q + k, bits[k]);
    }
  }
  p.merge_warp();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    sh_f[warp][0] = p.lse.m;
    sh_f[warp][1] = p.lse.s;
    sh_f[warp][2] = p.lse_t.m;
    sh_f[warp][3] = p.lse_t.s;
    sh_f[warp][4] = p.best.v;
    sh_i[warp] = p.best.i;
  }
  __syncthreads();
  if (warp != 0) return;
  Partial w;  // lanes past the warps hold an empty partial
  if (lane < kWarps) {
    w.lse = {sh_f[lane][0], sh_f[lane][1]};
    w.lse_t = {sh_f[lane][2], sh_f[lane][3]};
    w.best = {sh_f[lane][4], sh_i[lane]};
  }
  w.merge_warp();
  if (lane != 0) return;
  if (w.best.i == INT_MAX) {  // nothing finite in the row
    token[row] = 0;
    logprob[row] = sample_logprob[row] = -INFINITY;
    return;
  }
  const float xt = x[w.best.i], lse = w.lse.value();
  token[row] = w.best.i;
  logprob[row] = xt - lse;
  sample_logprob[row] = greedy ? 0.f : xt * inv_t - (unit_t ? lse : w.lse_t.value());
}

}  // namespace

cudaError_t sample_rows(const float* logits, int64_t rows, int64_t vocab, bool greedy, float temperature, uint64_t seed,
                        uint64_t draw, int64_t* token, float* logprob, float* sample_logprob, cudaStream_t stream) {
  if (rows < 1 || rows > INT_MAX || vocab < 1 || vocab > INT_MAX / 2 || (!greedy && !(temperature > 0.f))) {
    return cudaErrorInvalidValue;
  }
  const uint2 key = make_uint2(static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  sample_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      logits, static_cast<int>(vocab), greedy, greedy ? 1.f : 1.f / temperature, key, static_cast<uint32_t>(draw),
      static_cast<uint32_t>(draw >> 32), token, logprob, sample_logprob);
  return cudaGetLastError();
}

}  // namespace moerl::model::cuda
