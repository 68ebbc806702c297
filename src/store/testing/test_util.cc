// Test helpers for the store tests (see test_util.h).
#include "store/testing/test_util.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "base/error.h"
#include "base/files.h"
#include "io/checksum.h"

namespace moerl::store::testing {

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "moerl-store-test-XXXXXX").string();
  char* p = ::mkdtemp(tmpl.data());
  if (!p) throw std::runtime_error("mkdtemp failed");
  path_ = p;
}

TempDir::~TempDir() {
  try {
    remove_tree(path_);
  } catch (const Error&) {
  }
}

std::string random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 1);
  std::string s(n, '\0');
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = rng();
    std::memcpy(&s[i], &v, 8);
  }
  for (; i < n; ++i) s[i] = static_cast<char>(rng() | 1);
  return s;
}

void write_file(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string write_random_file(const std::string& path, uint64_t n, uint64_t seed) {
  std::ofstream f(path, std::ios::binary);
  io::Sha256 sha;
  uint64_t done = 0;
  uint64_t block = 0;
  while (done < n) {
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(n - done, 4u << 20));
    std::string b = random_bytes(chunk, seed + block++);
    f.write(b.data(), static_cast<std::streamsize>(b.size()));
    sha.update(b);
    done += chunk;
  }
  if (!f) throw std::runtime_error("cannot write " + path);
  return sha.hex();
}

}  // namespace moerl::store::testing
