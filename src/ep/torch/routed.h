// Routing state shared by the multi-rank Groups (fabric, alltoall): the send plan, what
// arrives from each source, where each received row lands in the output, and the
// received top-k metadata. A Handle's state points to one of these; immutable once the
// dispatch that made it returns (cached dispatch and combine only read it).
//
// Received row order (the contract both backends honour, so they are swappable):
//   normal:      by source rank, then source token order (one row per token and rank)
//   low_latency: by local expert, then source rank, then token (one row per token and
//                expert); num_recv_tokens_per_expert gives the group sizes.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "ep/ep.h"
#include "ep/kernels/routing.h"

namespace moerl::ep::detail {

struct RoutedState {
  Mode mode = Mode::kNormal;
  int num_ranks = 1;
  kernels::Routing routing;                 // what this rank sends
  at::Tensor row_token;                     // int64 [S], routing.row_token as a tensor
  std::vector<int64_t> recv_counts;         // [R] rows from each source
  std::vector<int64_t> recv_offsets;        // [R+1] in source-concatenated order
  std::vector<int64_t> recv_expert_counts;  // low_latency: [R*E_local] rows from (source, local expert)
  std::vector<int64_t> recv_pos;            // low_latency: source-concatenated row -> output row
  at::Tensor recv_pos_t;                    // int64 [N], recv_pos as a tensor (low_latency)
  at::Tensor recv_topk_idx_NK, recv_topk_weights_NK;
  std::vector<int64_t> per_expert;          // [E_local]
  int64_t num_tokens = 0, num_recv = 0;
  bool identity_order() const { return mode == Mode::kNormal; }
};

std::shared_ptr<RoutedState> plan_routing(const at::Tensor& topk_idx_TK, const at::Tensor& topk_weights_TK,
                                          int64_t num_experts, int num_ranks, Mode mode);
// counts: normal: [R] rows per source; low_latency: [R*E_local] rows per (source, expert).
void set_recv_counts(RoutedState& st, const std::vector<int64_t>& counts);
// Builds recv_topk_idx/weights from the per-source metadata blocks (source-concatenated
// row order, int32 local ids and float weights, K per row) and, in normal mode, the
// per-expert counts.
void set_recv_meta(RoutedState& st, const std::vector<const int32_t*>& idx_per_source,
                   const std::vector<const float*>& w_per_source);
Dispatched make_dispatched(const std::shared_ptr<RoutedState>& st, at::Tensor recv_x_NH);
std::shared_ptr<RoutedState> state_of(const Handle& h);

}  // namespace moerl::ep::detail
