// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), table-driven, for the runtime's
// record checksums. Kept local so runtime/ depends only on base/.
//
//   uint32_t c = crc32c(bytes.data(), bytes.size());
//   uint32_t c2 = crc32c_extend(c, more.data(), more.size());  // == crc32c of the concatenation
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace moerl::runtime {

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size);
inline uint32_t crc32c(const void* data, size_t size) { return crc32c_extend(0, data, size); }

}  // namespace moerl::runtime
