// The cuda_ipc send kernel: every row a rank sends goes straight into its destination's mapped
// buffer, at the row number the device plan gave it, with its top-k metadata beside it; the
// host needs no count. One warp per top-k slot that opens a row (the first slot of a token
// naming that destination group).
//
//   PeerPack p{...};                      // pointers on the device, peers' buffers mapped
//   cuda::pack_to_peers(p, stream);       // then cuda::signal_flags(...) tells the peers
//
// Only enqueues work on `stream`; returns the launch status.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "ep/cuda/signals.h"

namespace moerl::ep::cuda {

struct PeerBuffers {
  uint8_t* ptr[kMaxFlagPeers];
};

struct PeerPack {
  const void* x = nullptr;  // [T, row_bytes] rows to send
  int64_t row_bytes = 0;
  const int64_t* group_TK = nullptr;  // destination group of each slot (rank; global expert when
                                      // expert_groups), -1 for a slot that sends nothing
  const int64_t* idx_TK = nullptr;    // global expert ids (metadata)
  const float* w_TK = nullptr;        // their weights
  int64_t num_tokens = 0, topk = 0, experts_per_rank = 1;
  bool expert_groups = false;         // low_latency: one row per (token, expert)
  const int64_t* row_GT = nullptr;    // [G*T] the (g, t) row's number in the send order (group, token)
  const int64_t* first_R = nullptr;   // [R] the first send row of each destination rank
  const int64_t* rows_R = nullptr;    // [R] rows to each destination rank
  PeerBuffers peers{};                // every rank's mapped buffer
  size_t rows_offset = 0;             // where this rank's region starts in a destination's buffer
  size_t meta_offset = 0;             // where this rank's metadata slot starts there
  int64_t header_bytes = 0;           // the slot's counts, before the ids
  bool with_meta = false;             // write ids and weights too (a new plan)
};

cudaError_t pack_to_peers(const PeerPack& p, cudaStream_t stream);

}  // namespace moerl::ep::cuda
