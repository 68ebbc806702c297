// The ObjectStore contract, run over every backend (testing/store_contract.h: local, memory,
// S3 against the loopback test server, and the fault-injecting wrapper with no faults):
// put/get/head and overwrite, missing keys, ranges, streamed files, conditional create under
// contention, listing, idempotent remove, bad keys. Backend-only behaviour stays in the
// backend's own test file.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <thread>
#include <vector>

#include "base/error.h"
#include "io/checksum.h"
#include "store/testing/store_contract.h"

namespace moerl::store::testing {
namespace {

ErrorCode code_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "expected an Error";
  return ErrorCode::kInternal;
}

TEST_P(ObjectStoreContract, PutGetHeadOverwriteAndEmpty) {
  ObjectStore& s = store();
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
}

TEST_P(ObjectStoreContract, MissingKeysAreNotFound) {
  ObjectStore& s = store();
  EXPECT_FALSE(s.head("c/missing").has_value());
  EXPECT_EQ(code_of([&] { s.get("c/missing"); }), ErrorCode::kNotFound);
  EXPECT_EQ(code_of([&] { s.get_file("c/missing", tmp_.file("never")); }), ErrorCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(tmp_.file("never")));
}

TEST_P(ObjectStoreContract, Ranges) {
  ObjectStore& s = store();
  std::string b = random_bytes(777, 12);
  s.put("c/a.bin", b);
  EXPECT_EQ(s.get_range("c/a.bin", 100, 50), b.substr(100, 50));
  EXPECT_EQ(s.get_range("c/a.bin", 700, 500), b.substr(700));
  EXPECT_EQ(s.get_range("c/a.bin", 0, 1), b.substr(0, 1));
  EXPECT_EQ(s.get_range("c/a.bin", 777, 10), "");
  EXPECT_EQ(code_of([&] { s.get_range("c/a.bin", 778, 10); }), ErrorCode::kInvalidInput);
}

TEST_P(ObjectStoreContract, FilesStreamedBothWays) {
  ObjectStore& s = store();
  const uint64_t big = 3u << 20;
  std::string src = tmp_.file("src.bin"), dst = tmp_.file("dst.bin");
  std::string sha = write_random_file(src, big, 13);
  s.put_file("files/big.bin", src);
  EXPECT_EQ(s.head("files/big.bin")->size, big);
  s.get_file("files/big.bin", dst);
  EXPECT_EQ(io::sha256_file_hex(dst), sha);
  EXPECT_EQ(s.get_range("files/big.bin", big - 10, 10), read_file(src).substr(big - 10));
  EXPECT_TRUE(s.list_pending("").empty()) << "a finished write leaves no pending upload";
}

TEST_P(ObjectStoreContract, PutIfAbsentHasExactlyOneWinner) {
  ObjectStore& s = store();
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
}

// Prefix semantics (not directories), sorted, keys relative to the store root.
TEST_P(ObjectStoreContract, ListingIsSortedByPrefix) {
  ObjectStore& s = store();
  s.put("c/a.bin", "outside l/");
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
  EXPECT_EQ(s.list("").size(), 5u);
}

TEST_P(ObjectStoreContract, RemoveIsIdempotent) {
  ObjectStore& s = store();
  s.put("l/x/1", "1");
  s.put("l/x/2", "22");
  s.remove("l/x/1");
  s.remove("l/x/1");
  s.remove("never/there");
  EXPECT_FALSE(s.head("l/x/1").has_value());
  EXPECT_EQ(s.list("l/x/").size(), 1u);
}

TEST_P(ObjectStoreContract, BadKeysAreInvalidInput) {
  ObjectStore& s = store();
  EXPECT_EQ(code_of([&] { s.put("../escape", "x"); }), ErrorCode::kInvalidInput);
  EXPECT_EQ(code_of([&] { s.put("/abs", "x"); }), ErrorCode::kInvalidInput);
  EXPECT_EQ(code_of([&] { s.put("a//b", "x"); }), ErrorCode::kInvalidInput);
  EXPECT_EQ(code_of([&] { s.get(""); }), ErrorCode::kInvalidInput);
}

}  // namespace
}  // namespace moerl::store::testing
