// Round trips and rejection paths of the task / experience / snapshot encodings.
#include "runtime/records.h"

#include <gtest/gtest.h>

#include <random>

#include "base/error.h"
#include "io/checksum.h"
#include "runtime/experience_buffer.h"
#include "runtime/byte_codec.h"
#include "runtime/test_records.h"

namespace moerl::runtime {
namespace {

TEST(Records, TaskRoundTrip) {
  std::mt19937 rng(7);
  for (int i = 0; i < 50; ++i) {
    TaskUnit t = random_task(rng);
    TaskUnit b = decode_task(encode_task(t));
    EXPECT_EQ(b.task_id, t.task_id);
    EXPECT_EQ(b.attempt, t.attempt);
    EXPECT_EQ(b.group_size, t.group_size);
    EXPECT_EQ(b.prompt_ids, t.prompt_ids);
    EXPECT_EQ(b.prompt_text, t.prompt_text);
    EXPECT_EQ(b.reference, t.reference);
    EXPECT_EQ(b.created_unix_ms, t.created_unix_ms);
    EXPECT_EQ(b.cursor, t.cursor);
  }
}

TEST(Records, ExperienceRoundTrip) {
  std::mt19937 rng(11);
  for (int i = 0; i < 50; ++i) {
    ExperienceRecord r = random_record(rng);
    expect_equal(decode_experience(encode_experience(r)), r);
  }
}

TEST(Records, HeaderLayoutMatchesSpec) {
  std::mt19937 rng(3);
  std::string bytes = encode_task(random_task(rng));
  EXPECT_EQ(bytes.substr(0, 4), "MRTK");
  uint16_t version;
  uint32_t len, crc;
  std::memcpy(&version, bytes.data() + 4, 2);
  std::memcpy(&len, bytes.data() + 8, 4);
  std::memcpy(&crc, bytes.data() + 12, 4);
  EXPECT_EQ(version, kTaskRecordVersion);
  EXPECT_EQ(len, bytes.size() - 16);
  EXPECT_EQ(crc, io::crc32c(bytes.data() + 16, bytes.size() - 16));
}

void expect_rejected(const std::string& bytes, const std::string& needle) {
  try {
    decode_experience(bytes);
    FAIL() << "decoded a bad record; expected an error mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_FALSE(e.hint().empty());
  }
}

TEST(Records, RejectsCorruption) {
  std::mt19937 rng(5);
  std::string good = encode_experience(random_record(rng));
  std::string flipped = good;
  flipped[good.size() - 3] ^= 0x40;
  expect_rejected(flipped, "checksum mismatch");
  std::string newer = good;
  newer[4] = static_cast<char>(kExperienceRecordVersion + 1);
  expect_rejected(newer, "format version " + std::to_string(kExperienceRecordVersion + 1) + " is not supported");
  expect_rejected(good.substr(0, good.size() - 1), "payload bytes");
  expect_rejected(good.substr(0, 10), "shorter than");
  expect_rejected(encode_task(random_task(rng)), "bad magic");
  std::string flags = good;
  flags[6] = 1;
  expect_rejected(flags, "flags");
}

TEST(Records, ValidateNamesTheField) {
  std::mt19937 rng(9);
  ExperienceRecord r = random_record(rng);
  r.samples[0].behaviour_logprobs.pop_back();
  EXPECT_THROW(encode_experience(r), Error);
  ExperienceRecord r2 = random_record(rng);
  r2.samples[0].version_spans[0].start = 1;
  EXPECT_THROW(encode_experience(r2), Error);
  TaskUnit t;
  t.task_id = "x";
  EXPECT_THROW(encode_task(t), Error);  // no prompt
}

TEST(Records, StalenessUsesOldestSpan) {
  std::mt19937 rng(13);
  ExperienceRecord r = random_record(rng);  // spans at versions 10 and 11
  EXPECT_EQ(oldest_version(r), 10u);
  EXPECT_EQ(staleness(r, 13), 3u);
  EXPECT_EQ(staleness(r, 9), 0u);
  EXPECT_EQ(dedupe_key("a", 2), "a#2");
}

TEST(Records, TokenLagCountsEachTokensVersion) {
  ExperienceRecord r;
  Sample a;  // 10 tokens: 4 by version 5, 6 by version 7
  a.response_tokens.assign(10, 1);
  a.version_spans = {{0, 5}, {4, 7}};
  Sample b;  // 3 tokens by version 8
  b.response_tokens.assign(3, 1);
  b.version_spans = {{0, 8}};
  r.samples = {a, b};
  EXPECT_EQ(token_lag_sum(r, 8), 4u * 3 + 6u * 1 + 3u * 0);
  EXPECT_EQ(token_lag_sum(r, 6), 4u * 1);  // tokens newer than current count 0
  EXPECT_EQ(staleness(r, 8), 3u);          // the oldest span's lag, for comparison
}

TEST(Records, SnapshotRoundTrip) {
  std::mt19937 rng(17);
  BufferSnapshot s;
  s.cursor = "1700000000000-3";
  s.seen = {{"a#0", 12}, {"b#1", 13}};
  s.settled_below = 11;
  s.pending = {random_record(rng), random_record(rng)};
  s.ungot = {random_record(rng)};
  s.duplicates_dropped = 4;
  s.taken = 9;
  s.data_cursor = 1234567;
  s.extra = "{\"k\": 1}";
  std::string bytes = s.encode();
  BufferSnapshot b = BufferSnapshot::decode(bytes);
  EXPECT_EQ(b.cursor, s.cursor);
  EXPECT_EQ(b.seen, s.seen);
  EXPECT_EQ(b.settled_below, 11u);
  ASSERT_EQ(b.pending.size(), 2u);
  expect_equal(b.pending[1], s.pending[1]);
  ASSERT_EQ(b.ungot.size(), 1u);
  expect_equal(b.ungot[0], s.ungot[0]);
  EXPECT_EQ(b.duplicates_dropped, 4);
  EXPECT_EQ(b.taken, 9);
  EXPECT_EQ(b.data_cursor, 1234567u);
  EXPECT_EQ(b.extra, s.extra);
  bytes[20] ^= 1;
  EXPECT_THROW(BufferSnapshot::decode(bytes), Error);
}

// Checkpoints written before the settled watermark (snapshot version 1) still restore: their
// keys are kept (no cursor to settle them by) and nothing counts as settled.
TEST(Records, SnapshotVersionOneStillDecodes) {
  ByteWriter w;
  w.put_string("1700000000000-3");
  w.put<int64_t>(2);
  w.put<int64_t>(5);
  w.put<uint64_t>(77);
  w.put<uint32_t>(2);
  w.put_string("a#0");
  w.put_string("b#1");
  w.put<uint32_t>(0);
  w.put<uint32_t>(0);
  w.put_string("{}");
  const char magic[4] = {'M', 'R', 'B', 'S'};
  BufferSnapshot b = BufferSnapshot::decode(frame_record(magic, 1, w.bytes()));
  EXPECT_EQ(b.cursor, "1700000000000-3");
  EXPECT_EQ(b.data_cursor, 77u);
  EXPECT_EQ(b.settled_below, 0u);
  ASSERT_EQ(b.seen.size(), 2u);
  EXPECT_EQ(b.seen.at("b#1"), UINT64_MAX);
}

}  // namespace
}  // namespace moerl::runtime
