// check_record: random sane records pass; each kind of poison is refused with a reason that
// names the record, the sample and the field.
#include "runtime/record_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "runtime/test_records.h"

namespace moerl::runtime {
namespace {

// Random records (token ids < 1000, versions 10/11, no routing) and limits they satisfy.
RecordLimits limits_for(const ExperienceRecord& r) {
  return {.vocab_size = 1000, .group_size = static_cast<uint32_t>(r.samples.size()), .max_version = 11};
}

void expect_refused(const ExperienceRecord& r, const RecordLimits& lim, const std::string& part) {
  std::string why = check_record(r, lim);
  EXPECT_NE(why.find(part), std::string::npos) << "reason: '" << why << "', expected it to hold '" << part << "'";
}

TEST(RecordCheck, RandomSaneRecordsPass) {
  std::mt19937 rng(5);
  for (int i = 0; i < 200; ++i) {
    ExperienceRecord r = random_record(rng);
    EXPECT_EQ(check_record(r, limits_for(r)), "") << i;
    // Decoded from the wire as well.
    EXPECT_EQ(check_record(decode_experience(encode_experience(r)), limits_for(r)), "") << i;
  }
}

TEST(RecordCheck, OutOfVocabularyTokenIds) {
  std::mt19937 rng(6);
  ExperienceRecord r = random_record(rng);
  const std::string who = dedupe_key(r.task_id, r.attempt);
  ExperienceRecord big = r;
  big.samples.back().response_tokens[2] = 1000;
  expect_refused(big, limits_for(r),
                 who + " sample " + std::to_string(r.samples.size() - 1) +
                     ": response token 2 is id 1000, outside the vocabulary [0, 1000)");
  ExperienceRecord negative = r;
  negative.samples[0].prompt_tokens[0] = -7;
  expect_refused(negative, limits_for(r), who + " sample 0: prompt token 0 is id -7");
  // Unchecked without a vocabulary size.
  RecordLimits any = limits_for(r);
  any.vocab_size = 0;
  EXPECT_EQ(check_record(big, any), "");
}

TEST(RecordCheck, NonFiniteLogprobs) {
  std::mt19937 rng(7);
  ExperienceRecord r = random_record(rng);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    ExperienceRecord p = r;
    p.samples[0].behaviour_logprobs[1] = bad;
    expect_refused(p, limits_for(r), "sample 0: behaviour logprob of response token 1 is ");
    // Survives the wire unchanged: the CRC does not catch it.
    expect_refused(decode_experience(encode_experience(p)), limits_for(r), "behaviour logprob");
  }
}

TEST(RecordCheck, CountsLengthsAndShapes) {
  std::mt19937 rng(8);
  ExperienceRecord r = random_record(rng);
  RecordLimits lim = limits_for(r);
  RecordLimits wider = lim;
  wider.group_size = lim.group_size + 1;
  expect_refused(r, wider, std::to_string(r.samples.size()) + " samples, the group size is " +
                               std::to_string(wider.group_size));
  ExperienceRecord empty = r;
  empty.samples.clear();
  expect_refused(empty, {.vocab_size = 1000}, "no samples");
  ExperienceRecord lengths = r;
  lengths.samples[0].behaviour_logprobs.pop_back();
  expect_refused(lengths, lim, "behaviour logprobs for");
  ExperienceRecord no_prompt = r;
  no_prompt.samples[0].prompt_tokens.clear();
  expect_refused(no_prompt, lim, "sample 0: the prompt is empty");

  // Routing replay: the model's layers x top-k and expert range.
  ExperienceRecord routed = r;
  for (Sample& s : routed.samples) {
    s.routing_layers = 2;
    s.routing_top_k = 2;
    s.routed_experts.assign(s.routed_tokens() * 4, 3);
  }
  RecordLimits model = lim;
  model.routing_layers = 2;
  model.routing_top_k = 2;
  model.num_experts = 4;
  EXPECT_EQ(check_record(routed, model), "");
  RecordLimits deeper = model;
  deeper.routing_layers = 3;
  expect_refused(routed, deeper, "routing replay is 2 layers x top-2, the model has 3 MoE layers x top-2");
  ExperienceRecord far = routed;
  far.samples[0].routed_experts[5] = 4;
  expect_refused(far, model, "sample 0: routing replay entry 5 is expert 4, outside [0, 4)");
}

TEST(RecordCheck, VersionNewerThanPublished) {
  std::mt19937 rng(9);
  ExperienceRecord r = random_record(rng);  // spans at versions 10 and 11
  RecordLimits lim = limits_for(r);
  lim.max_version = 10;
  expect_refused(r, lim, "claims policy version 11, newer than the newest published, 10");
  lim.check_version = false;
  EXPECT_EQ(check_record(r, lim), "");
}

}  // namespace
}  // namespace moerl::runtime
