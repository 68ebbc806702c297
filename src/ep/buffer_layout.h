// Sizes of the preallocated EP buffers, shared by the transports that write rows into
// fixed regions (fabric: libfabric receive buffer; cuda_ipc: peers' mapped device memory).
// Pure arithmetic from ep::Config; no allocation. Also the two checks that reject inputs
// the buffers were not sized for.
//
//   BufferLayout b = BufferLayout::make(cfg, num_experts, num_ranks, BufferLayout::Meta::kInline);
//   void* buf = alloc(b.total_bytes);          // 2 * R regions of b.region_bytes
//   b.check_dispatch(T, K, "fabric");          // throws moerl::Error past max_tokens / max_topk
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ep/ep.h"

namespace moerl::ep {

struct BufferLayout {
  // Where a dispatch's counts and top-k metadata travel.
  enum class Meta {
    kInline,    // in the region: wire header + counts, rows, then K int32 ids + K float32 weights per row (fabric)
    kSeparate,  // elsewhere (cuda_ipc: metadata slots beside the regions); the region holds rows only
  };
  static constexpr size_t kAlign = 4096;

  int64_t max_tokens = 0, max_topk = 0, hidden = 0;  // the Config bounds the sizes come from
  int64_t max_rows = 0;            // rows one source can send one destination in one operation
  int64_t max_row_bytes = 0;       // a row of `hidden` float32 (bfloat16 rows take half)
  int64_t meta_bytes_per_row = 0;  // kInline: K ids + K weights; kSeparate: 0
  size_t header_bytes = 0;         // kInline: wire header and up to E/R counts; kSeparate: 0
  size_t region_bytes = 0;         // one region (one peer, one direction), rounded up to kAlign
  size_t total_bytes = 0;          // 2 * R regions: R for dispatch/send, R for combine/receive

  static BufferLayout make(const Config& cfg, int64_t num_experts, int num_ranks, Meta meta);

  // Throws unless num_tokens <= max_tokens and topk <= max_topk.
  void check_dispatch(int64_t num_tokens, int64_t topk, const std::string& backend) const;
  // Throws unless row_bytes <= max_row_bytes; `what` names the tensor ("x", "combine input y").
  void check_row_bytes(int64_t row_bytes, const std::string& what, const std::string& backend) const;
};

}  // namespace moerl::ep
