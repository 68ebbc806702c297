// The rollout instance's wire message between its ranks: a round trip keeps every field and
// unit; damaged bytes (truncated, a flipped bit, an unknown command) are refused with an
// error naming the message, never decoded into something else.
#include "rollout/instance.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace moerl::rollout {
namespace {

InstanceMessage batch_message() {
  InstanceMessage m{.command = InstanceCommand::kBatch, .batch = 17};
  for (int i = 0; i < 3; ++i) {
    runtime::TaskUnit u;
    u.task_id = "c" + std::to_string(40 + i);
    u.attempt = static_cast<uint32_t>(i);
    u.group_size = 4;
    u.prompt_ids = {1, 5 + i, 9, 2};
    u.prompt_text = "what is " + std::to_string(i) + "+1?";
    u.reference = std::to_string(i + 1);
    u.cursor = 40 + static_cast<uint64_t>(i);
    m.units.push_back(u);
  }
  return m;
}

TEST(InstanceMessage, RoundTripKeepsEveryUnit) {
  const InstanceMessage m = batch_message();
  const InstanceMessage back = decode_instance_message(encode_instance_message(m));
  EXPECT_EQ(back.command, InstanceCommand::kBatch);
  EXPECT_EQ(back.batch, 17u);
  ASSERT_EQ(back.units.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back.units[i].task_id, m.units[i].task_id);
    EXPECT_EQ(back.units[i].attempt, m.units[i].attempt);
    EXPECT_EQ(back.units[i].prompt_ids, m.units[i].prompt_ids);
    EXPECT_EQ(back.units[i].prompt_text, m.units[i].prompt_text);
    EXPECT_EQ(back.units[i].reference, m.units[i].reference);
    EXPECT_EQ(back.units[i].cursor, m.units[i].cursor);
  }
  const InstanceMessage idle = decode_instance_message(encode_instance_message({}));
  EXPECT_EQ(idle.command, InstanceCommand::kIdle);
  EXPECT_TRUE(idle.units.empty());
}

TEST(InstanceMessage, DamagedBytesAreRefused) {
  const std::string bytes = encode_instance_message(batch_message());
  for (size_t cut : {size_t{0}, size_t{3}, size_t{15}, bytes.size() / 2, bytes.size() - 1}) {
    EXPECT_THROW(decode_instance_message(bytes.substr(0, cut)), Error) << "cut at " << cut;
  }
  std::string flipped = bytes;
  flipped[bytes.size() - 5] ^= 0x10;  // caught by the frame's CRC
  try {
    decode_instance_message(flipped);
    FAIL() << "a flipped bit decoded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("instance message"), std::string::npos) << e.what();
  }
  InstanceMessage bad = batch_message();
  bad.command = static_cast<InstanceCommand>(9);
  EXPECT_THROW(decode_instance_message(encode_instance_message(bad)), Error);
}

TEST(InstanceAgreement, CommonVersionOnlyWhenEveryRankHasIt) {
  EXPECT_EQ((InstanceAgreement{.staged_min = 5, .staged_max = 5}).common_staged(), 5u);
  EXPECT_EQ((InstanceAgreement{.staged_min = 4, .staged_max = 5}).common_staged(), 0u);
}

}  // namespace
}  // namespace moerl::rollout
