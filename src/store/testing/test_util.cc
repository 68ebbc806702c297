// Test helpers and the shared ObjectStore contract.
#include "store/testing/test_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

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

static ErrorCode code_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "expected an Error";
  return ErrorCode::kInternal;
}

void run_store_contract(ObjectStore& s, const TempDir& tmp, uint64_t big) {
  SCOPED_TRACE(s.uri());
  // put / get / head
  std::string a = random_bytes(1000, 11), b = random_bytes(777, 12);
  s.put("c/a.bin", a);
  EXPECT_EQ(s.get("c/a.bin"), a);
  auto h1 = s.head("c/a.bin");
  ASSERT_TRUE(h1.has_value());
  EXPECT_EQ(h1->size, 1000u);
  EXPECT_EQ(h1->key, "c/a.bin");
  EXPECT_GT(h1->mtime_unix, 1600000000);
  s.put("c/a.bin", b);  // overwrite
  EXPECT_EQ(s.get("c/a.bin"), b);
  auto h2 = s.head("c/a.bin");
  ASSERT_TRUE(h2.has_value());
  EXPECT_EQ(h2->size, 777u);
  EXPECT_NE(h1->etag, h2->etag);
  s.put("c/empty", "");
  EXPECT_EQ(s.get("c/empty"), "");
  EXPECT_EQ(s.head("c/empty")->size, 0u);

  // missing keys
  EXPECT_FALSE(s.head("c/missing").has_value());
  EXPECT_EQ(code_of([&] { s.get("c/missing"); }), ErrorCode::kNotFound);
  EXPECT_EQ(code_of([&] { s.get_file("c/missing", tmp.file("never")); }), ErrorCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(tmp.file("never")));

  // ranges
  EXPECT_EQ(s.get_range("c/a.bin", 100, 50), b.substr(100, 50));
  EXPECT_EQ(s.get_range("c/a.bin", 700, 500), b.substr(700));
  EXPECT_EQ(s.get_range("c/a.bin", 0, 1), b.substr(0, 1));
  EXPECT_EQ(s.get_range("c/a.bin", 777, 10), "");
  EXPECT_EQ(code_of([&] { s.get_range("c/a.bin", 778, 10); }), ErrorCode::kInvalidInput);

  // files, streamed both ways
  std::string src = tmp.file("src.bin"), dst = tmp.file("dst.bin");
  std::string sha = write_random_file(src, big, 13);
  s.put_file("files/big.bin", src);
  EXPECT_EQ(s.head("files/big.bin")->size, big);
  s.get_file("files/big.bin", dst);
  EXPECT_EQ(io::sha256_file_hex(dst), sha);
  EXPECT_EQ(s.get_range("files/big.bin", big - 10, 10), read_file(src).substr(big - 10));

  // conditional create, also under contention: exactly one writer wins
  EXPECT_EQ(s.put_if_absent("c/m.json", "first"), PutOutcome::kCreated);
  EXPECT_EQ(s.put_if_absent("c/m.json", "second"), PutOutcome::kAlreadyExists);
  EXPECT_EQ(s.get("c/m.json"), "first");
  std::atomic<int> created{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      if (s.put_if_absent("c/race.json", "writer " + std::to_string(t)) == PutOutcome::kCreated) ++created;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(created.load(), 1);

  // listing: prefix semantics, sorted, relative keys
  s.put("l/x/1", "1");
  s.put("l/x/2", "22");
  s.put("l/xy/3", "333");
  s.put("l/z", "4444");
  auto all = s.list("l/");
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].key, "l/x/1");
  EXPECT_EQ(all[3].key, "l/z");
  EXPECT_EQ(all[3].size, 4u);
  EXPECT_EQ(s.list("l/x/").size(), 2u);
  EXPECT_EQ(s.list("l/x").size(), 3u);
  EXPECT_TRUE(s.list("nothing/").empty());
  EXPECT_GE(s.list("").size(), 9u);

  // remove is idempotent
  s.remove("l/x/1");
  s.remove("l/x/1");
  EXPECT_FALSE(s.head("l/x/1").has_value());
  EXPECT_EQ(s.list("l/x/").size(), 1u);

  // bad keys
  EXPECT_EQ(code_of([&] { s.put("../escape", "x"); }), ErrorCode::kInvalidInput);
  EXPECT_EQ(code_of([&] { s.put("/abs", "x"); }), ErrorCode::kInvalidInput);
  EXPECT_EQ(code_of([&] { s.put("a//b", "x"); }), ErrorCode::kInvalidInput);
  EXPECT_EQ(code_of([&] { s.get(""); }), ErrorCode::kInvalidInput);
}

}  // namespace moerl::store::testing
