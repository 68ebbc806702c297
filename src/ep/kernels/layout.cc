// Layout kernel: one pass over topk_idx, counting tokens per rank (deduplicated) and
// per expert (one per occurrence).
#include "ep/kernels/layout.h"

#include <algorithm>

namespace moerl::ep::kernels {

std::string compute_layout(const int64_t* topk_idx, int64_t num_tokens, int64_t topk,
                           int64_t num_experts, int num_ranks, int64_t* per_rank,
                           int64_t* per_expert, bool* in_rank) {
  const int64_t experts_per_rank = num_experts / num_ranks;
  std::fill(per_rank, per_rank + num_ranks, 0);
  std::fill(per_expert, per_expert + num_experts, 0);
  std::fill(in_rank, in_rank + num_tokens * num_ranks, false);
  for (int64_t t = 0; t < num_tokens; ++t) {
    bool* row = in_rank + t * num_ranks;
    for (int64_t k = 0; k < topk; ++k) {
      const int64_t e = topk_idx[t * topk + k];
      if (e == -1) continue;
      if (e < -1 || e >= num_experts) {
        return "topk_idx[" + std::to_string(t) + "," + std::to_string(k) + "]=" +
               std::to_string(e) + " is outside [-1, " + std::to_string(num_experts) + ")";
      }
      ++per_expert[e];
      row[e / experts_per_rank] = true;
    }
    for (int r = 0; r < num_ranks; ++r) per_rank[r] += row[r];
  }
  return "";
}

}  // namespace moerl::ep::kernels
