// A commit written by several writers (the ranks of a trainer group): each puts its shards
// under one prefix, one adopts the others' entries and commits. The reader sees every shard
// verified; an adopted shard that is missing, resized or named twice blocks the manifest.
#include "store/commit.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "store/memory_store.h"
#include "store/testing/test_util.h"

namespace moerl::store {
namespace {

TEST(CommitAdopt, ShardsOfSeveralWritersCommitAsOne) {
  MemoryStore s("adopt-one");
  CommitWriter rank0(s, "weights/v00000003"), rank1(s, "weights/v00000003");
  rank0.put_bytes("model-00001-of-00002.safetensors", testing::random_bytes(3000, 1));
  rank1.put_bytes("model-00002-of-00002.safetensors", testing::random_bytes(2000, 2));
  // The entry travels as JSON, as it does between ranks.
  const nlohmann::json sent = to_json(rank1.entries().at(0));
  rank0.adopt(commit_entry_from_json(sent, "rank 1"));
  rank0.put_bytes("model.safetensors.index.json", "{}");
  rank0.commit({{"version", 3}});
  CommitReader r = CommitReader::open(s, "weights/v00000003");
  EXPECT_EQ(r.names().size(), 3u);
  EXPECT_EQ(r.get_bytes("model-00002-of-00002.safetensors"), testing::random_bytes(2000, 2));
  EXPECT_EQ(r.get_bytes("model-00001-of-00002.safetensors"), testing::random_bytes(3000, 1));
}

TEST(CommitAdopt, AMissingOrResizedAdoptedShardBlocksTheManifest) {
  MemoryStore s("adopt-missing");
  CommitWriter w(s, "ckpt/step-1");
  w.put_bytes("a.bin", "aaaa");
  w.adopt({"b.bin", 4, std::string(64, '0')});  // another rank that never uploaded it
  EXPECT_THROW(w.commit(), Error);
  EXPECT_FALSE(s.head("ckpt/step-1/manifest.moerl.json"));
  CommitWriter w2(s, "ckpt/step-2");
  s.put("ckpt/step-2/b.bin", "bbb");
  w2.adopt({"b.bin", 4, std::string(64, '0')});  // the upload was cut short
  EXPECT_THROW(w2.commit(), Error);
  EXPECT_FALSE(s.head("ckpt/step-2/manifest.moerl.json"));
}

TEST(CommitAdopt, AShardNamedTwiceOrAMalformedEntryIsRefused) {
  MemoryStore s("adopt-twice");
  CommitWriter w(s, "ckpt/step-1");
  w.put_bytes("a.bin", "aaaa");
  EXPECT_THROW(w.adopt({"a.bin", 4, std::string(64, '0')}), Error);
  EXPECT_THROW(w.adopt({"manifest.moerl.json", 4, std::string(64, '0')}), Error);
  try {
    commit_entry_from_json({{"name", "x"}, {"size", "four"}}, "rank 3's shard");
    FAIL() << "a malformed entry was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 3's shard"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moerl::store
