// LocalStore and MemoryStore instantiate the ObjectStore contract (testing/store_contract.h);
// here too what is theirs alone: files under the local root, temp files hidden from listings
// and reported as pending, memory stores shared by name, URI dispatch in open_store.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <utime.h>

#include <atomic>
#include <filesystem>

#include "base/config.h"
#include "base/error.h"
#include "store/local_store.h"
#include "store/memory_store.h"
#include "store/testing/store_contract.h"
#include "store/testing/test_util.h"

namespace moerl::store {
namespace {

using testing::ObjectStoreContract;
using testing::StoreBackend;
using testing::TempDir;

const StoreBackend kLocal{"Local", [](const std::string& root) -> std::unique_ptr<ObjectStore> {
  return std::make_unique<LocalStore>(root + "/data");
}};
const StoreBackend kMemory{"Memory", [](const std::string&) -> std::unique_ptr<ObjectStore> {
  static std::atomic<int> n{0};
  return std::make_unique<MemoryStore>("contract-" + std::to_string(n++));
}};
INSTANTIATE_TEST_SUITE_P(Local, ObjectStoreContract, ::testing::Values(kLocal));
INSTANTIATE_TEST_SUITE_P(Memory, ObjectStoreContract, ::testing::Values(kMemory));

TEST(LocalStore, KeysAreFilesUnderTheRoot) {
  TempDir root;
  LocalStore s(root.path() + "/data");
  s.put("l/z", "4444");
  EXPECT_EQ(testing::read_file(root.path() + "/data/l/z"), "4444");
}

TEST(MemoryStore, SharedByName) {
  MemoryStore s("shared");
  s.put("l/z", "4444");
  MemoryStore same("shared");
  EXPECT_EQ(same.get("l/z"), "4444");
}

TEST(LocalStore, TempFilesAreHiddenAndPending) {
  TempDir root;
  LocalStore s(root.path());
  s.put("v1/a", "aaa");
  // A writer that died after creating its temp file, an hour ago.
  std::string stale = root.path() + "/v1/.b.moerl-tmp-123-0-7";
  testing::write_file(stale, "partial");
  struct utimbuf old {std::time(nullptr) - 3600, std::time(nullptr) - 3600};
  ASSERT_EQ(::utime(stale.c_str(), &old), 0);
  auto listed = s.list("");
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].key, "v1/a");
  auto pending = s.list_pending("v1/");
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].key, "v1/b");
  EXPECT_EQ(pending[0].upload_id, "v1/.b.moerl-tmp-123-0-7");
  EXPECT_LE(pending[0].initiated_unix, std::time(nullptr) - 3500);
  EXPECT_TRUE(s.list_pending("v2/").empty());
  s.abort_pending(pending[0]);
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_THROW(s.abort_pending({"v1/a", "v1/a", 0}), Error);  // not a temp file
  EXPECT_EQ(s.get("v1/a"), "aaa");
}

TEST(LocalStore, RemovePrunesEmptyDirectories) {
  TempDir root;
  LocalStore s(root.path());
  s.put("a/b/c/d", "x");
  s.remove("a/b/c/d");
  EXPECT_FALSE(std::filesystem::exists(root.path() + "/a"));
  EXPECT_TRUE(std::filesystem::exists(root.path()));
}

TEST(OpenStore, DispatchesOnScheme) {
  TempDir root;
  auto a = open_store(root.path());
  EXPECT_EQ(a->uri(), "file://" + root.path());
  auto b = open_store("file://" + root.path());
  a->put("k", "v");
  EXPECT_EQ(b->get("k"), "v");
  auto m = open_store("memory://dispatch");
  EXPECT_EQ(m->uri(), "memory://dispatch");
  auto s3 = open_store("s3://bucket/pre/fix/");
  EXPECT_EQ(s3->uri(), "s3://bucket/pre/fix");
  auto code = [](const std::string& uri) {
    try {
      open_store(uri);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("HINT"), std::string::npos) << e.what();
      return e.code();
    }
    return ErrorCode::kInternal;
  };
  EXPECT_EQ(code("gs://bucket"), ErrorCode::kInvalidInput);
  EXPECT_EQ(code("s3://"), ErrorCode::kInvalidInput);
  EXPECT_EQ(code("file://relative"), ErrorCode::kInvalidInput);
  EXPECT_EQ(code("memory://"), ErrorCode::kInvalidInput);
  EXPECT_EQ(code(""), ErrorCode::kInvalidInput);
}

}  // namespace
}  // namespace moerl::store

namespace moerl::store {
namespace {

TEST(StoreOptions, FromConfigTable) {
  ConfigDoc doc = ConfigDoc::parse(
      "[store]\nendpoint = \"http://127.0.0.1:9000\"\naddressing = \"virtual\"\npart_size_mib = 8\nconcurrency = 3\n",
      "test.toml");
  ConfigTable t = doc.root().table("store");
  StoreOptions o = store_options_from_config(t);
  t.done();
  EXPECT_EQ(o.s3.endpoint, "http://127.0.0.1:9000");
  EXPECT_EQ(o.s3.addressing, Addressing::kVirtual);
  EXPECT_EQ(o.s3.part_size, 8u << 20);
  EXPECT_EQ(o.s3.concurrency, 3);
  EXPECT_EQ(o.s3.max_attempts, 10);
  ConfigDoc bad = ConfigDoc::parse("[store]\npart_size_mib = 1\n", "bad.toml");
  ConfigTable b = bad.root().table("store");
  EXPECT_THROW(store_options_from_config(b), Error);
}

}  // namespace
}  // namespace moerl::store
