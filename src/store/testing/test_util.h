// Test helpers for the store tests: a temp directory removed at scope exit, random
// (non-zero-seeded) payloads, whole-file read/write. The ObjectStore contract every backend
// must pass is the suite in store_contract.h. Test-only (moerl_store_testing).
#pragma once

#include <cstdint>
#include <string>

#include "store/object_store.h"

namespace moerl::store::testing {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string random_bytes(size_t n, uint64_t seed);
void write_file(const std::string& path, const std::string& data);
std::string read_file(const std::string& path);
// Writes n random bytes to path without holding them all in memory; returns their sha256.
std::string write_random_file(const std::string& path, uint64_t n, uint64_t seed);

}  // namespace moerl::store::testing
