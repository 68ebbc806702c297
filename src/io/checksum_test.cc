// Checksums against published test vectors, plus streaming-vs-buffer agreement.

#include "io/checksum.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"

namespace moerl::io {
namespace {

TEST(Checksum, Sha256Vectors) {
  EXPECT_EQ(sha256_hex("abc", 3),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("", 0),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Checksum, Crc32cVectors) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
  // Extending over pieces equals one pass.
  EXPECT_EQ(crc32c("6789", 4, crc32c("12345", 5)), 0xE3069283u);
  // 32 zero bytes (RFC 3720 B.4).
  std::vector<uint8_t> zeros(32, 0);
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  // 32 0xFF bytes (RFC 3720 B.4).
  std::string ones(32, '\xff');
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  std::string ab = "hello, world";
  EXPECT_EQ(crc32c(ab.data() + 5, ab.size() - 5, crc32c(ab.data(), 5)), crc32c(ab.data(), ab.size()));
}

TEST(Checksum, FileMatchesBuffer) {
  std::mt19937 rng(7);
  std::vector<uint8_t> data(3 * (1 << 20) + 123);  // spans several read blocks
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  std::string path = ::testing::TempDir() + "/moerl_io_" + std::to_string(::getpid()) + "_sha_test.bin";
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(data.data(), 1, data.size(), f), data.size());
  std::fclose(f);
  EXPECT_EQ(sha256_file_hex(path), sha256_hex(data.data(), data.size()));
  std::remove(path.c_str());
  EXPECT_THROW(sha256_file_hex(path), Error);
}

}  // namespace
}  // namespace moerl::io
