// The send plan of a cuda_ipc dispatch, built on the GPU without a host sync: every row's
// number comes from a cumulative sum over the (group, token) mask of ep/torch/device_plan.h, so
// the send kernel (ep/cuda/peer_pack.h) writes each row at its place in its destination's region
// and no count has to reach the host before the rows move. It also holds the counts each
// destination reads first and, for combine, where each token's returned rows will land.
//
//   auto st = ipc_plan(idx_TK, w_TK, E, R, cfg.mode, buffers.max_rows);   // CUDA tensors
#pragma once

#include <ATen/ATen.h>

#include <memory>

#include "ep/torch/routed.h"

namespace moerl::ep::detail {

struct IpcState : RoutedState {
  const void* group = nullptr;      // the group that planned it (set by the group)
  at::Tensor key_TK, idx_TK, w_TK;  // int64 groups (-1: none), int64 ids, float32 weights [T,K]
  at::Tensor row_GT;                // int64 [G*T]: the (group, token) row's number in the send order
  at::Tensor first_R, rows_R;       // int64 [R]: first send row and rows of each destination
  at::Tensor header_RC;             // int64 [R, 1+El]: per destination, rows, then rows (low_latency)
                                    // or tokens (normal) per local expert
  at::Tensor combine_code_TP;       // int64 [T,P]: d * max_rows + j of token t's rows, in (rank,
                                    // expert) order; -1 pads
  at::Tensor num_bad;               // int64 scalar: ids outside [-1, E), reported after the dispatch
};

// idx_TK, w_TK on the GPU; max_rows is the regions' row stride (BufferLayout::max_rows).
std::shared_ptr<IpcState> ipc_plan(const at::Tensor& topk_idx_TK, const at::Tensor& topk_weights_TK,
                                   int64_t num_experts, int num_ranks, Mode mode, int64_t max_rows);

}  // namespace moerl::ep::detail
