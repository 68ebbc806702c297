// Checksums: SHA-256 and HMAC-SHA256 (OpenSSL EVP) for content addressing of files and
// buffers, commit manifests and S3 SigV4 signing, and CRC-32C (Castagnoli, software table)
// for framing on-wire and on-disk records. The one implementation of each in moerl.
//
//   std::string h = sha256_hex(buf, n);          // 64 lowercase hex digits
//   Sha256 s;  s.update(a);  s.update(b);  std::string d = s.hex();   // streaming
//   std::string f = sha256_file_hex("w.safetensors", &size);
//   uint32_t c = crc32c(rec, len);               // crc32c("123456789") == 0xE3069283
//   c = crc32c(more, more_len, c);               // extend over several pieces
//
// Functions are thread-safe (no shared mutable state); a Sha256 object has one owner.
// sha256_file_hex throws moerl::Error (kNotFound or kIo) naming the file when it cannot be
// read; OpenSSL failures throw Error(kInternal).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX

namespace moerl::io {

// Incremental SHA-256. digest()/hex() finish it; updating afterwards is a CHECK failure.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::string digest();  // 32 raw bytes
  std::string hex();     // 64 lowercase hex digits

 private:
  evp_md_ctx_st* ctx_;
  bool finished_ = false;
};

std::string sha256_hex(const void* data, size_t size);
std::string sha256_hex(std::string_view data);
std::string sha256_raw(std::string_view data);  // 32 raw bytes
// Streams the file in 1 MiB reads; `size_out`, when given, receives its length in bytes.
std::string sha256_file_hex(const std::string& path, uint64_t* size_out = nullptr);
std::string hmac_sha256_raw(std::string_view key, std::string_view data);
std::string to_hex(std::string_view raw);  // lowercase, two digits a byte

// CRC-32C of `data`; pass the previous result as `crc` to continue over a further piece.
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);

}  // namespace moerl::io
