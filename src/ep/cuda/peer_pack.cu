// pack_to_peers of ep/cuda/peer_pack.h.
#include "ep/cuda/peer_pack.h"

#include <algorithm>

namespace moerl::ep::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

template <class V>
__device__ void warp_copy(const V* __restrict__ s, V* __restrict__ d, int64_t width, int lane) {
  int64_t v = lane;
  for (; v + 96 < width; v += 128) {
    V a = s[v], b = s[v + 32], c = s[v + 64], e = s[v + 96];
    d[v] = a; d[v + 32] = b; d[v + 64] = c; d[v + 96] = e;
  }
  for (; v < width; v += 32) d[v] = s[v];
}

template <class V>
__global__ void pack_kernel(PeerPack p) {
  const int lane = threadIdx.x & 31;
  const int64_t slots = p.num_tokens * p.topk, K = p.topk, T = p.num_tokens;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32; i < slots;
       i += static_cast<int64_t>(gridDim.x) * kWarps) {
    const int64_t t = i / K, k = i % K;
    const int64_t* group = p.group_TK + t * K;
    const int64_t g = group[k];
    if (g < 0) continue;
    bool first = true;
    for (int64_t k2 = 0; k2 < k; ++k2) first = first && group[k2] != g;
    if (!first) continue;  // an earlier slot of this token opened the row
    const int64_t d = p.expert_groups ? g / p.experts_per_rank : g;
    const int64_t j = p.row_GT[g * T + t] - p.first_R[d];
    uint8_t* buf = p.peers.ptr[d];
    warp_copy(reinterpret_cast<const V*>(static_cast<const uint8_t*>(p.x) + t * p.row_bytes),
              reinterpret_cast<V*>(buf + p.rows_offset + j * p.row_bytes), p.row_bytes / static_cast<int64_t>(sizeof(V)),
              lane);
    if (!p.with_meta) continue;
    uint8_t* meta = buf + p.meta_offset + p.header_bytes;
    int32_t* ids = reinterpret_cast<int32_t*>(meta) + j * K;
    float* ws = reinterpret_cast<float*>(meta + p.rows_R[d] * K * 4) + j * K;
    for (int64_t k2 = lane; k2 < K; k2 += 32) {
      const bool mine = group[k2] == g;
      ids[k2] = mine ? static_cast<int32_t>(p.idx_TK[t * K + k2] % p.experts_per_rank) : -1;
      ws[k2] = mine ? p.w_TK[t * K + k2] : 0.f;
    }
  }
}

bool aligned16(const void* q) { return (reinterpret_cast<uintptr_t>(q) & 15) == 0; }

}  // namespace

cudaError_t pack_to_peers(const PeerPack& p, cudaStream_t stream) {
  const int64_t slots = p.num_tokens * p.topk;
  if (slots <= 0 || p.row_bytes <= 0) return cudaSuccess;
  const int grid = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>((slots + kWarps - 1) / kWarps, 132 * 32)));
  // Destination rows are row_bytes apart from 4096-aligned region starts.
  if (p.row_bytes % 16 == 0 && aligned16(p.x) && p.rows_offset % 16 == 0) {
    pack_kernel<uint4><<<grid, kThreads, 0, stream>>>(p);
  } else {
    pack_kernel<unsigned char><<<grid, kThreads, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

}  // namespace moerl::ep::cuda
