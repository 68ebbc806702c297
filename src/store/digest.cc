// SHA-256 / HMAC over OpenSSL's EVP interface.
#include "store/digest.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "base/error.h"

namespace moerl::store {

struct Sha256::Impl {
  EVP_MD_CTX* ctx = nullptr;
  bool finished = false;
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) {
  impl_->ctx = EVP_MD_CTX_new();
  MOERL_CHECK(impl_->ctx != nullptr);
  MOERL_CHECK(EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr) == 1);
}

Sha256::~Sha256() { EVP_MD_CTX_free(impl_->ctx); }

void Sha256::update(const void* data, size_t size) {
  MOERL_CHECK(!impl_->finished) << "Sha256 updated after digest()";
  MOERL_CHECK(EVP_DigestUpdate(impl_->ctx, data, size) == 1);
}

std::string Sha256::digest() {
  MOERL_CHECK(!impl_->finished) << "Sha256 digest() called twice";
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  MOERL_CHECK(EVP_DigestFinal_ex(impl_->ctx, out, &n) == 1);
  impl_->finished = true;
  return std::string(reinterpret_cast<char*>(out), n);
}

std::string Sha256::hex() { return to_hex(digest()); }

std::string sha256_raw(std::string_view data) {
  Sha256 s;
  s.update(data);
  return s.digest();
}

std::string sha256_hex(std::string_view data) { return to_hex(sha256_raw(data)); }

std::string sha256_file_hex(const std::string& path, uint64_t* size_out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw Error("cannot read '" + path + "': " + std::strerror(errno), "check that the file exists and is readable",
                ErrorCode::kIo);
  }
  Sha256 s;
  std::vector<char> buf(1 << 20);
  uint64_t total = 0;
  while (true) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      throw Error("reading '" + path + "' failed: " + std::strerror(e), "check the disk", ErrorCode::kIo);
    }
    if (n == 0) break;
    s.update(buf.data(), static_cast<size_t>(n));
    total += static_cast<uint64_t>(n);
  }
  ::close(fd);
  if (size_out) *size_out = total;
  return s.hex();
}

std::string hmac_sha256_raw(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  MOERL_CHECK(HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
                   reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &n) != nullptr);
  return std::string(reinterpret_cast<char*>(out), n);
}

std::string to_hex(std::string_view raw) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(raw.size() * 2, '0');
  for (size_t i = 0; i < raw.size(); ++i) {
    auto b = static_cast<unsigned char>(raw[i]);
    out[2 * i] = kDigits[b >> 4];
    out[2 * i + 1] = kDigits[b & 15];
  }
  return out;
}

std::string base64_encode(std::string_view raw) {
  std::string out(4 * ((raw.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(raw.data()), static_cast<int>(raw.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace moerl::store
