// SHA-256 / HMAC-SHA256 through OpenSSL's EVP interface and a table-driven CRC-32C (poly
// 0x82F63B78, reflected), the same CRC that iSCSI, ext4 and LevelDB use.

#include "io/checksum.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "base/error.h"

namespace moerl::io {
namespace {

[[noreturn]] void openssl_failed(const char* what) {
  throw Error(std::string("OpenSSL: SHA-256 ") + what + " failed", "check the OpenSSL installation",
              ErrorCode::kInternal);
}

constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}

constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr) openssl_failed("context allocation");
  if (EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx_);
    openssl_failed("init");
  }
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

void Sha256::update(const void* data, size_t size) {
  MOERL_CHECK(!finished_) << "Sha256 updated after digest()";
  if (size > 0 && EVP_DigestUpdate(ctx_, data, size) != 1) openssl_failed("update");
}

std::string Sha256::digest() {
  MOERL_CHECK(!finished_) << "Sha256 digest() called twice";
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_DigestFinal_ex(ctx_, out, &n) != 1) openssl_failed("final");
  finished_ = true;
  return std::string(reinterpret_cast<char*>(out), n);
}

std::string Sha256::hex() { return to_hex(digest()); }

std::string sha256_raw(std::string_view data) {
  Sha256 s;
  s.update(data);
  return s.digest();
}

std::string sha256_hex(std::string_view data) { return to_hex(sha256_raw(data)); }

std::string sha256_hex(const void* data, size_t size) {
  return sha256_hex(std::string_view(static_cast<const char*>(data), size));
}

std::string sha256_file_hex(const std::string& path, uint64_t* size_out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    throw Error("cannot open '" + path + "' to checksum it: " + std::strerror(e),
                "check that the file exists and is readable", e == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo);
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
      throw Error("read error while checksumming '" + path + "': " + std::strerror(e), "check the disk",
                  ErrorCode::kIo);
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
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &n) == nullptr) {
    openssl_failed("HMAC");
  }
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

uint32_t crc32c(const void* data, size_t size, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  for (size_t i = 0; i < size; ++i) c = kCrc32cTable[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
  return ~c;
}

}  // namespace moerl::io
