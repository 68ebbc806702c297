// Experience records with routing replay (version 2): ids round-trip exactly in both widths
// (uint8 when every id < 256, else uint16), a count that does not match the tokens is
// rejected, and version-1 records (no routing) are still read.
#include <gtest/gtest.h>

#include "base/error.h"
#include "runtime/byte_codec.h"
#include "runtime/records.h"
#include "runtime/test_records.h"

namespace moerl::runtime {
namespace {

ExperienceRecord with_routing(uint16_t max_id) {
  ExperienceRecord r = record_for(make_task("t", 3), "w", 1);
  for (Sample& s : r.samples) {
    s.routing_layers = 3;
    s.routing_top_k = 2;
    for (size_t i = 0; i < s.routed_tokens() * 3 * 2; ++i) s.routed_experts.push_back(static_cast<uint16_t>((i * 37) % (max_id + 1)));
  }
  return r;
}

TEST(RecordsRouting, RoundTripsInBothWidths) {
  for (uint16_t max_id : {uint16_t{127}, uint16_t{255}, uint16_t{300}}) {
    ExperienceRecord r = with_routing(max_id);
    const std::string bytes = encode_experience(r);
    ExperienceRecord back = decode_experience(bytes);
    ASSERT_EQ(back.samples.size(), r.samples.size());
    for (size_t i = 0; i < r.samples.size(); ++i) {
      EXPECT_EQ(back.samples[i].routed_experts, r.samples[i].routed_experts) << "max id " << max_id;
      EXPECT_EQ(back.samples[i].routing_layers, 3);
      EXPECT_EQ(back.samples[i].routing_top_k, 2);
    }
    const size_t ids = r.samples[0].routed_experts.size() * r.samples.size();
    if (max_id < 256) EXPECT_LT(bytes.size(), encode_experience(with_routing(300)).size() - ids / 2);
  }
}

TEST(RecordsRouting, ACountThatDoesNotMatchTheTokensIsRejected) {
  ExperienceRecord r = with_routing(100);
  r.samples[1].routed_experts.pop_back();
  try {
    encode_experience(r);
    ADD_FAILURE() << "a short routing record was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("routing replay holds"), std::string::npos) << e.what();
  }
}

// A version-1 record, written field by field as that version's spec says, still decodes.
TEST(RecordsRouting, VersionOneRecordsAreStillRead) {
  ExperienceRecord r = record_for(make_task("old", 4), "w", 2);
  ByteWriter w;
  w.put_string(r.task_id);
  w.put<uint32_t>(r.attempt);
  w.put_string(r.worker_id);
  w.put<uint64_t>(r.cursor);
  w.put<int64_t>(0);
  w.put<int64_t>(0);
  w.put<double>(0);
  w.put<double>(0);
  w.put<uint32_t>(static_cast<uint32_t>(r.samples.size()));
  for (const Sample& s : r.samples) {
    w.put_vector(s.prompt_tokens);
    w.put_vector(s.response_tokens);
    w.put_vector(s.behaviour_logprobs);
    w.put<float>(s.reward);
    w.put<uint32_t>(1);
    w.put<uint32_t>(0);
    w.put<uint64_t>(2);
    w.put<uint8_t>(0);
    w.put<double>(0);
  }
  const char magic[4] = {'M', 'R', 'E', 'X'};
  ExperienceRecord back = decode_experience(frame_record(magic, 1, w.bytes()));
  ASSERT_EQ(back.samples.size(), r.samples.size());
  EXPECT_EQ(back.samples[0].response_tokens, r.samples[0].response_tokens);
  EXPECT_TRUE(back.samples[0].routed_experts.empty());
}

}  // namespace
}  // namespace moerl::runtime
