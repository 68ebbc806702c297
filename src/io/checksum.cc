// SHA-256 through OpenSSL's EVP interface and a table-driven CRC-32C (poly 0x82F63B78,
// reflected), the same CRC that iSCSI, ext4 and LevelDB use.

#include "io/checksum.h"

#include <openssl/evp.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "base/error.h"

namespace moerl::io {
namespace {

using MdCtx = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

MdCtx new_sha256() {
  MdCtx ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    throw Error("OpenSSL: cannot initialise SHA-256", "check the OpenSSL installation",
                ErrorCode::kInternal);
  }
  return ctx;
}

void update(EVP_MD_CTX* ctx, const void* data, size_t size) {
  if (size > 0 && EVP_DigestUpdate(ctx, data, size) != 1) {
    throw Error("OpenSSL: SHA-256 update failed", "check the OpenSSL installation",
                ErrorCode::kInternal);
  }
}

std::string finish_hex(EVP_MD_CTX* ctx) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx, digest, &len) != 1) {
    throw Error("OpenSSL: SHA-256 final failed", "check the OpenSSL installation",
                ErrorCode::kInternal);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out(2 * len, '0');
  for (unsigned int i = 0; i < len; ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 15];
  }
  return out;
}

std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}

}  // namespace

std::string sha256_hex(const void* data, size_t size) {
  MdCtx ctx = new_sha256();
  update(ctx.get(), data, size);
  return finish_hex(ctx.get());
}

std::string sha256_file_hex(const std::string& path) {
  std::unique_ptr<FILE, decltype(&std::fclose)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) {
    throw Error("cannot open '" + path + "' to checksum it: " + std::strerror(errno),
                "check the path and permissions",
                errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo);
  }
  MdCtx ctx = new_sha256();
  std::vector<unsigned char> buf(1 << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0) update(ctx.get(), buf.data(), n);
  if (std::ferror(f.get())) {
    throw Error("read error while checksumming '" + path + "'", "check the disk", ErrorCode::kIo);
  }
  return finish_hex(ctx.get());
}

uint32_t crc32c(const void* data, size_t size, uint32_t crc) {
  static const std::array<uint32_t, 256> kTable = make_crc32c_table();
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  for (size_t i = 0; i < size; ++i) c = kTable[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return ~c;
}

}  // namespace moerl::io
