// BufferLayout: the worst-case message of one source, and the input checks against it.
#include "ep/buffer_layout.h"

#include <algorithm>

#include "base/error.h"
#include "ep/transport/wire.h"

namespace moerl::ep {

BufferLayout BufferLayout::make(const Config& cfg, int64_t num_experts, int num_ranks, Meta meta) {
  BufferLayout b;
  b.max_tokens = cfg.max_tokens_per_rank;
  b.max_topk = cfg.max_topk;
  b.hidden = cfg.hidden;
  const int64_t local_experts = num_experts / num_ranks;
  // NOTE: a region holds what one source sends one destination. Normal mode sends a token
  // at most once per destination rank. Low-latency mode sends one row per distinct
  // (token, local expert) (kernels/routing.h: duplicate ids in a token's top-k share a
  // row), and a token names at most K experts while the destination holds only E/R, so a
  // token adds at most min(K, E/R) rows. The bound is reached (every token picks
  // min(K, E/R) distinct experts of one rank), so it is the exact worst case. cuda_ipc used
  // max_tokens * K, also safe but K / min(K, E/R) times larger (8x for K=8, one expert per
  // rank); fabric's bound is the right one and both use it now.
  b.max_rows = cfg.mode == Mode::kNormal ? cfg.max_tokens_per_rank
                                         : cfg.max_tokens_per_rank * std::min<int64_t>(cfg.max_topk, local_experts);
  b.max_row_bytes = cfg.hidden * 4;
  if (meta == Meta::kInline) {
    b.meta_bytes_per_row = cfg.max_topk * 8;
    b.header_bytes = wire::rows_offset(static_cast<size_t>(local_experts));  // counts: 1 (normal) or E/R
  }
  const size_t bytes = b.header_bytes + static_cast<size_t>(b.max_rows) * (b.max_row_bytes + b.meta_bytes_per_row);
  b.region_bytes = (bytes + kAlign - 1) / kAlign * kAlign;
  b.total_bytes = 2 * static_cast<size_t>(num_ranks) * b.region_bytes;
  return b;
}

void BufferLayout::check_dispatch(int64_t num_tokens, int64_t topk, const std::string& backend) const {
  if (num_tokens > max_tokens || topk > max_topk) {
    throw Error("ep " + backend + ": dispatch of T=" + std::to_string(num_tokens) + " tokens, K=" +
                    std::to_string(topk) + " exceeds the buffers sized for max_tokens_per_rank=" +
                    std::to_string(max_tokens) + ", max_topk=" + std::to_string(max_topk),
                "raise max_tokens_per_rank / max_topk in the [ep] config, or dispatch in chunks");
  }
}

void BufferLayout::check_row_bytes(int64_t row_bytes, const std::string& what, const std::string& backend) const {
  if (row_bytes > max_row_bytes) {
    throw Error("ep " + backend + ": " + what + " rows are " + std::to_string(row_bytes) +
                    " bytes, above the buffers sized for hidden=" + std::to_string(hidden) + " float32",
                "raise hidden in the [ep] config to the model's hidden size");
  }
}

}  // namespace moerl::ep
