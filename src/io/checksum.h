// Checksums: SHA-256 (OpenSSL EVP) for content addressing of files and buffers, and
// CRC-32C (Castagnoli, software table) for framing on-wire and on-disk records.
//
//   std::string h = sha256_hex(buf, n);          // 64 lowercase hex digits
//   std::string f = sha256_file_hex("w.safetensors");
//   uint32_t c = crc32c(rec, len);               // crc32c("123456789") == 0xE3069283
//   c = crc32c(more, more_len, c);               // extend over several pieces
//
// Thread-safe (no shared mutable state). sha256_file_hex throws moerl::Error (kIo or
// kNotFound) naming the file when it cannot be read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace moerl::io {

std::string sha256_hex(const void* data, size_t size);
// Streams the file in 1 MiB blocks.
std::string sha256_file_hex(const std::string& path);

// CRC-32C of `data`; pass the previous result as `crc` to continue over a further piece.
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);

}  // namespace moerl::io
