// The send plan of a dispatch on the GPU, shared by the device backends (nccl, cuda_ipc),
// built with tensor ops on the ids' device. A group is a destination rank (normal mode: one
// row per token and rank) or a global expert (low_latency: one row per token and expert);
// rows are ordered by group, then token, as ep/kernels/routing.h plans on the host.
//
//   GroupMask m = group_mask(idx_TK, E, R, cfg.mode);        // no host sync (cuda_ipc)
//   DevicePlan p = device_plan(idx_TK, w_TK, E, R, cfg.mode); // plus the rows (nonzero(): one sync)
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "ep/ep.h"

namespace moerl::ep::detail {

struct GroupMask {
  at::Tensor key_TK;      // int64 [T,K]: each slot's group, -1 for dropped ids and ids outside [0, E)
  at::Tensor group_mask;  // bool [G,T]: token t sends a row to group g
  at::Tensor group_rows;  // int64 [G]: rows per group
  at::Tensor num_bad;     // int64 scalar: ids outside [-1, E) (their slots send nothing)
};

struct DevicePlan : GroupMask {
  at::Tensor row_group;  // int64 [S]: each row's group
  at::Tensor row_token;  // int64 [S]: each row's source token
  at::Tensor row_idx;    // int32 [S,K]: local expert ids of the slots the row serves, -1 elsewhere
  at::Tensor row_w;      // float32 [S,K]: their weights, 0 elsewhere
};

GroupMask group_mask(const at::Tensor& topk_idx_TK, int64_t num_experts, int num_ranks, Mode mode);
DevicePlan device_plan(const at::Tensor& topk_idx_TK, const at::Tensor& topk_weights_TK, int64_t num_experts,
                       int num_ranks, Mode mode);

// Owning rank of each id (E / R experts a rank), -1 for dropped (negative) ids.
at::Tensor owner_rank(const at::Tensor& idx, int64_t experts_per_rank);
// An integer tensor's values on the host, as int64 (one device->host copy).
std::vector<int64_t> host_values(const at::Tensor& t);

}  // namespace moerl::ep::detail
