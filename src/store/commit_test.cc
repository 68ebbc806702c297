// The commit protocol on the memory and local backends, with fault injection: a crash at
// every write position, dropped writes, corruption, re-commits, cleanup and retention.
// Invariant checked throughout: a reader sees a whole, verified commit or none.
#include "store/commit.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "base/error.h"
#include "store/fault_store.h"
#include "store/local_store.h"
#include "store/memory_store.h"
#include "store/testing/test_util.h"

namespace moerl::store {
namespace {

using testing::TempDir;

// Writes version `v` (3 shards: one from a file, two from bytes) and commits it.
Manifest write_version(ObjectStore& s, const TempDir& tmp, int v, const std::string& root = "ckpt") {
  std::string file = tmp.file("model-" + std::to_string(v) + ".bin");
  testing::write_random_file(file, 200000 + v, 100 + v);
  CommitWriter w(s, root + "/step-" + std::to_string(1000 + v));
  w.put_file("model.safetensors", file);
  w.put_bytes("optimizer.bin", testing::random_bytes(5000, 200 + v));
  w.put_bytes("state/rng.json", "{\"step\":" + std::to_string(v) + "}");
  return w.commit({{"step", v}});
}

// Every byte a reader can reach verifies; returns the step it saw (-1 for none).
int read_whole(ObjectStore& s, const TempDir& tmp, const std::string& root = "ckpt") {
  auto r = CommitReader::latest(s, root);
  if (!r) return -1;
  int step = r->manifest().extra.at("step").get<int>();
  EXPECT_EQ(r->names().size(), 3u);
  EXPECT_EQ(r->get_bytes("optimizer.bin"), testing::random_bytes(5000, 200 + step));
  EXPECT_EQ(r->get_bytes("state/rng.json"), "{\"step\":" + std::to_string(step) + "}");
  std::string out = tmp.file("restored.bin");
  r->get_file("model.safetensors", out);
  EXPECT_EQ(std::filesystem::file_size(out), static_cast<uint64_t>(200000 + step));
  return step;
}

class CommitOnBackends : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<ObjectStore> make() {
    if (GetParam() == "local") return std::make_unique<LocalStore>(dir_.path());
    static int n = 0;
    return std::make_unique<MemoryStore>("commit-" + std::to_string(n++));
  }
  TempDir dir_, tmp_;
};

TEST_P(CommitOnBackends, RoundTripAndLatest) {
  auto s = make();
  EXPECT_FALSE(CommitReader::latest(*s, "ckpt").has_value());
  Manifest m1 = write_version(*s, tmp_, 1);
  EXPECT_EQ(m1.objects.size(), 3u);
  EXPECT_EQ(m1.find("model.safetensors")->size, 200001u);
  EXPECT_EQ(read_whole(*s, tmp_), 1);
  write_version(*s, tmp_, 2);
  EXPECT_EQ(read_whole(*s, tmp_), 2);
  EXPECT_EQ(list_commits(*s, "ckpt"), (std::vector<std::string>{"ckpt/step-1001", "ckpt/step-1002"}));
  auto r1 = CommitReader::open(*s, "ckpt/step-1001");
  EXPECT_EQ(r1.manifest().extra["step"], 1);
  EXPECT_TRUE(r1.has("state/rng.json"));
  EXPECT_FALSE(r1.has("nope"));
  EXPECT_THROW(r1.get_bytes("nope"), Error);
}

TEST_P(CommitOnBackends, UncommittedPrefixIsInvisibleAndCleanedUp) {
  auto s = make();
  write_version(*s, tmp_, 1);
  {
    CommitWriter w(*s, "ckpt/step-1002");
    w.put_bytes("model.safetensors", "half");
    // no commit(): the writer "died"
  }
  try {
    CommitReader::open(*s, "ckpt/step-1002");
    ADD_FAILURE() << "opened an uncommitted prefix";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  }
  EXPECT_EQ(read_whole(*s, tmp_), 1);
  // Within the grace period nothing is removed; with grace 0 the orphan goes.
  EXPECT_TRUE(cleanup(*s, "ckpt", 3600).removed_objects.empty());
  auto report = cleanup(*s, "ckpt", -10);
  EXPECT_EQ(report.removed_objects, (std::vector<std::string>{"ckpt/step-1002/model.safetensors"}));
  EXPECT_FALSE(s->head("ckpt/step-1002/model.safetensors").has_value());
  EXPECT_EQ(read_whole(*s, tmp_), 1);  // committed data untouched
  EXPECT_EQ(s->list("ckpt/step-1001/").size(), 4u);
}

TEST_P(CommitOnBackends, RecommitSameContentIsIdempotentDifferentIsRejected) {
  auto s = make();
  write_version(*s, tmp_, 1);
  {
    CommitWriter w(*s, "ckpt/step-1001");
    std::string file = tmp_.file("model-1.bin");
    w.put_file("model.safetensors", file);
    w.put_bytes("optimizer.bin", testing::random_bytes(5000, 201));
    w.put_bytes("state/rng.json", "{\"step\":1}");
    EXPECT_NO_THROW(w.commit({{"step", 1}}));
  }
  CommitWriter w(*s, "ckpt/step-1001");
  w.put_bytes("model.safetensors", "different");
  try {
    w.commit();
    ADD_FAILURE() << "different content committed over an existing commit";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidInput);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, CommitOnBackends, ::testing::Values("memory", "local"));

TEST(Commit, CrashAtEveryWriteNeverExposesAPartialCommit) {
  TempDir tmp;
  // Writes of version 2: three shards, the manifest, the latest pointer.
  for (int k = 0; k <= 5; ++k) {
    SCOPED_TRACE("crash after " + std::to_string(k) + " writes");
    auto inner = std::make_shared<MemoryStore>("crash-" + std::to_string(k));
    write_version(*inner, tmp, 1);
    FaultInjectingStore faulty(inner, {.crash_after_writes = k});
    bool finished = true;
    try {
      write_version(faulty, tmp, 2);
    } catch (const Error& e) {
      finished = false;
      EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
      EXPECT_TRUE(faulty.crashed());
    }
    EXPECT_EQ(finished, k == 5);
    // The manifest is write #3: from k >= 4 on, version 2 is committed; at k == 4 the
    // pointer still names version 1, which readers keep using (whole and verified).
    EXPECT_EQ(read_whole(*inner, tmp), k >= 5 ? 2 : 1);
    EXPECT_EQ(list_commits(*inner, "ckpt").size(), k >= 4 ? 2u : 1u);
    // Cleanup after the crash leaves exactly the committed objects.
    cleanup(*inner, "ckpt", -10);
    EXPECT_EQ(inner->list("ckpt/step-1002/").size(), k >= 4 ? 4u : 0u);
    // And the next run can commit version 2 again from scratch.
    if (k < 5) write_version(*inner, tmp, 2);  // identical re-commit accepted at k == 4
    EXPECT_EQ(read_whole(*inner, tmp), 2);
  }
}

TEST(Commit, DroppedAndFailedShardWritesBlockTheManifest) {
  TempDir tmp;
  auto inner = std::make_shared<MemoryStore>("dropped");
  FaultInjectingStore dropping(inner, {.drop_write_at = 1});
  EXPECT_THROW(write_version(dropping, tmp, 1), Error);
  EXPECT_EQ(dropping.injected(), 1);
  EXPECT_FALSE(CommitReader::latest(*inner, "ckpt").has_value());
  EXPECT_FALSE(inner->head("ckpt/step-1001/manifest.moerl.json").has_value());

  FaultInjectingStore failing(inner, {.fail_write_at = 2});
  try {
    write_version(failing, tmp, 1);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
  }
  EXPECT_FALSE(CommitReader::latest(*inner, "ckpt").has_value());

  // A burst of transient failures surfaces as kUnavailable; once it passes, writes converge.
  FaultInjectingStore bursty(inner, {.fail_next_calls = 3});
  int failures = 0;
  while (true) {
    try {
      write_version(bursty, tmp, 1);
      break;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
      ASSERT_LT(++failures, 10);
    }
  }
  EXPECT_EQ(failures, 3);
  EXPECT_EQ(read_whole(*inner, tmp), 1);
}

TEST(Commit, CorruptionIsDetected) {
  TempDir tmp;
  MemoryStore s("corrupt");
  write_version(s, tmp, 1);
  // A shard altered after commit: same size, different bytes.
  std::string opt = s.get("ckpt/step-1001/optimizer.bin");
  opt[17] ^= 0x40;
  s.put("ckpt/step-1001/optimizer.bin", opt);
  auto r = CommitReader::open(s, "ckpt/step-1001");
  EXPECT_THROW(r.get_bytes("optimizer.bin"), Error);
  // A truncated shard fails at open (sizes are checked).
  s.put("ckpt/step-1001/state/rng.json", "{");
  EXPECT_THROW(CommitReader::open(s, "ckpt/step-1001"), Error);
  EXPECT_NO_THROW(CommitReader::open(s, "ckpt/step-1001", Verify::kNone));
  // A tampered manifest fails its checksum; an unknown version is refused by name.
  std::string m = s.get("ckpt/step-1001/manifest.moerl.json");
  std::string tampered = m;
  tampered.replace(tampered.find("\"step\": 1"), 9, "\"step\": 7");
  s.put("ckpt/step-1001/manifest.moerl.json", tampered);
  try {
    CommitReader::open(s, "ckpt/step-1001", Verify::kNone);
    ADD_FAILURE() << "tampered manifest accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
  }
  auto j = nlohmann::json::parse(m);
  j["version"] = 99;
  try {
    Manifest::parse(j.dump(), "test");
    ADD_FAILURE() << "version 99 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("version 99"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Manifest::parse("{\"magic\":\"other\"}", "test"), Error);
  // latest() skips the damaged commit rather than returning it.
  s.put("ckpt/latest", "garbage");
  EXPECT_FALSE(CommitReader::latest(s, "ckpt").has_value());
}

TEST(Commit, LocalCleanupAbortsStaleTempFilesAndRetentionKeepsNewest) {
  TempDir root, tmp;
  LocalStore s(root.path());
  for (int v = 1; v <= 4; ++v) write_version(s, tmp, v);
  testing::write_file(root.path() + "/ckpt/step-1004/.x.moerl-tmp-1-2-3", "junk");
  EXPECT_TRUE(cleanup(s, "ckpt", 3600).aborted_uploads.empty());
  auto report = cleanup(s, "ckpt", -10);
  EXPECT_EQ(report.aborted_uploads, (std::vector<std::string>{"ckpt/step-1004/x"}));
  EXPECT_TRUE(report.removed_objects.empty());
  auto removed = retain_latest(s, "ckpt", 2);
  EXPECT_EQ(removed, (std::vector<std::string>{"ckpt/step-1001", "ckpt/step-1002"}));
  EXPECT_EQ(list_commits(s, "ckpt"), (std::vector<std::string>{"ckpt/step-1003", "ckpt/step-1004"}));
  EXPECT_FALSE(std::filesystem::exists(root.path() + "/ckpt/step-1001"));
  EXPECT_EQ(read_whole(s, tmp), 4);
}

// A pinned commit (a KL reference's checkpoint) survives retention however old it is.
TEST(Commit, RetentionKeepsPinnedCommits) {
  TempDir root, tmp;
  LocalStore s(root.path());
  for (int v = 1; v <= 4; ++v) write_version(s, tmp, v);
  auto removed = retain_latest(s, "ckpt", 1, {"ckpt/step-1001"});
  EXPECT_EQ(removed, (std::vector<std::string>{"ckpt/step-1002", "ckpt/step-1003"}));
  EXPECT_EQ(list_commits(s, "ckpt"), (std::vector<std::string>{"ckpt/step-1001", "ckpt/step-1004"}));
  EXPECT_EQ(CommitReader::open(s, "ckpt/step-1001").get_bytes("state/rng.json"), "{\"step\":1}");
}

TEST(Commit, BadNamesAreRejected) {
  MemoryStore s("names");
  EXPECT_THROW(CommitWriter(s, ""), Error);
  EXPECT_THROW(CommitWriter(s, "../x"), Error);
  CommitWriter w(s, "v/1");
  EXPECT_THROW(w.put_bytes("manifest.moerl.json", "x"), Error);
  w.put_bytes("a", "x");
  EXPECT_THROW(w.put_bytes("a", "y"), Error);
  w.commit();
  EXPECT_THROW(w.commit(), Error);
}

}  // namespace
}  // namespace moerl::store
