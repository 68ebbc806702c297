// On-wire header of every EP fabric message (spec: docs/formats/ep_wire.md). A message is
// the header, then per-rank or per-expert row counts, then rows, then top-k metadata.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace moerl::ep::wire {

constexpr uint32_t kMagic = 0x5045454D;  // "MEEP" little-endian bytes: 'M','E','E','P'
constexpr uint16_t kVersion = 1;

enum class Kind : uint16_t {
  kDispatch = 1,        // rows + counts + top-k metadata
  kDispatchCached = 2,  // rows + counts (metadata reused from the cached handle)
  kCombine = 3,         // rows only, in the order the receiver sent them
};

struct Header {
  uint32_t magic;
  uint16_t version;
  uint16_t kind;
  uint32_t seq;        // operation sequence number of the sender's group (low 32 bits)
  uint32_t src;        // sender rank
  uint64_t rows;       // rows in this message
  uint32_t row_bytes;  // bytes per row
  uint32_t topk;       // K of the metadata (0 when absent)
  uint32_t num_counts; // int64 counts following the header (1 normal, E_local low-latency)
  uint32_t checksum;   // FNV-1a over the bytes above
  uint8_t reserved[24];
};
static_assert(sizeof(Header) == 64, "wire header is 64 bytes");

inline uint32_t header_checksum(const Header& h) {
  const auto* p = reinterpret_cast<const uint8_t*>(&h);
  uint32_t x = 2166136261u;
  for (size_t i = 0; i < offsetof(Header, checksum); ++i) x = (x ^ p[i]) * 16777619u;
  return x;
}

inline size_t align64(size_t n) { return (n + 63) & ~size_t(63); }
// Byte offsets inside one message.
inline size_t counts_offset() { return sizeof(Header); }
inline size_t rows_offset(size_t num_counts) { return sizeof(Header) + align64(num_counts * 8); }

}  // namespace moerl::ep::wire
