// Send plan on raw pointers: from topk_idx/topk_weights, the rows each rank sends to each
// destination and the top-k metadata those rows carry. Shared by every multi-rank
// transport, so fabric and alltoall deliver the same rows in the same order.
//
//   Routing r = build_routing(idx, w, T, K, E, R, /*per_expert_rows=*/false);
//   // rows for rank d: r.row_token[r.dest_offsets[d] .. r.dest_offsets[d+1])
//
// Thread-safe (pure). Assumes topk_idx was validated by compute_layout.
#pragma once

#include <cstdint>
#include <vector>

namespace moerl::ep::kernels {

struct Routing {
  int num_ranks = 1;
  int64_t num_tokens = 0, topk = 0, experts_per_rank = 0;
  bool per_expert_rows = false;  // low-latency: one row per (token, local expert)
  std::vector<int64_t> dest_offsets;      // [R+1] into the row arrays
  std::vector<int64_t> row_token;         // [S] source token index of each send row
  std::vector<int32_t> row_topk_idx;      // [S*K] local expert id at the destination, else -1
  std::vector<float> row_topk_weights;    // [S*K] weight where row_topk_idx >= 0, else 0
  // per_expert_rows only: [R*E_local+1] offsets; rows of (dest d, local expert e) are
  // expert_offsets[d*E_local+e] .. expert_offsets[d*E_local+e+1].
  std::vector<int64_t> expert_offsets;
  int64_t num_rows() const { return static_cast<int64_t>(row_token.size()); }
  int64_t rows_to(int d) const { return dest_offsets[d + 1] - dest_offsets[d]; }
};

// Normal mode: a token goes once to each rank holding any of its experts; rows ordered by
// (destination, token). Per-expert mode: once per distinct (token, expert); ordered by
// (destination, local expert, token), and only the top-k positions naming that expert are
// set in the row's metadata. topk_weights may be null (weights then 0).
Routing build_routing(const int64_t* topk_idx, const float* topk_weights, int64_t num_tokens,
                      int64_t topk, int64_t num_experts, int num_ranks, bool per_expert_rows);

}  // namespace moerl::ep::kernels
