// SHA-256 and HMAC-SHA256 (OpenSSL EVP) for SigV4 signing and commit manifests: one-shot over
// bytes, streaming over a file, and hex encoding. Stateless functions; Sha256 objects are not
// shared between threads.
//
//   std::string h = sha256_hex("abc");            // "ba7816bf..."
//   Sha256 s; s.update(a); s.update(b); std::string d = s.hex();
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace moerl::store {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::string digest();  // 32 raw bytes; the object is finished afterwards
  std::string hex();     // 64 lowercase hex chars; the object is finished afterwards

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string sha256_hex(std::string_view data);
std::string sha256_raw(std::string_view data);
// Streams the file in 1 MiB reads; throws Error(kIo) naming the path when it cannot be read.
std::string sha256_file_hex(const std::string& path, uint64_t* size_out = nullptr);
std::string hmac_sha256_raw(std::string_view key, std::string_view data);
std::string to_hex(std::string_view raw);
std::string base64_encode(std::string_view raw);

}  // namespace moerl::store
