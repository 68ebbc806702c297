// Dispatch layout on raw pointers: which ranks and experts each token goes to. No
// at::Tensor here (see ep/torch/ for the tensor layer). Pure functions, thread-safe.
//
//   compute_layout(topk_idx, T, K, E, R, per_rank, per_expert, in_rank);
#pragma once

#include <cstdint>
#include <string>

namespace moerl::ep::kernels {

// Expert e lives on rank e / (E / R). -1 in topk_idx means "no expert".
// Outputs: per_rank[R], per_expert[E] (int64), in_rank[T*R] (bool, row-major [T,R]).
// A token routed to several experts of one rank counts once for that rank.
// Returns "" or a message naming the first out-of-range entry.
std::string compute_layout(const int64_t* topk_idx, int64_t num_tokens, int64_t topk,
                           int64_t num_experts, int num_ranks, int64_t* per_rank,
                           int64_t* per_expert, bool* in_rank);

}  // namespace moerl::ep::kernels
