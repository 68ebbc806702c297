// Task units and experience records: the two messages of the asynchronous runtime, and
// their binary encoding (spec: docs/formats/task_record.md, docs/formats/experience_record.md).
// Torch-free: token ids are int32 vectors, logprobs float vectors.
//
//   TaskUnit t{.task_id = "gsm8k-17", .group_size = 8, .prompt_ids = ids, .cursor = 17};
//   std::string bytes = encode_task(t);
//   TaskUnit back = decode_task(bytes);         // throws moerl::Error on a bad magic/version/crc
//   uint64_t lag = staleness(record, /*current_version=*/12);
// Plain values; encode/decode are pure and thread-safe. Decoding rejects unknown versions,
// checksum mismatches, truncation and inconsistent fields with moerl::Error(kIo).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moerl::runtime {

// One prompt group: the unit that is queued, leased and acknowledged.
struct TaskUnit {
  std::string task_id;        // stable across redeliveries; non-empty
  uint32_t attempt = 0;       // bumped only when the controller regenerates (e.g. stale)
  uint32_t group_size = 1;    // responses to generate for this prompt (>= 1)
  std::vector<int32_t> prompt_ids;
  std::string prompt_text;    // either or both of ids / text may be set
  std::string reference;      // verifier's reference answer (opaque to the runtime)
  int64_t created_unix_ms = 0;
  uint64_t cursor = 0;        // data cursor index of this prompt in the dataset
};

// A span of response tokens produced by one policy version: tokens [start, next.start).
struct VersionSpan {
  uint32_t start = 0;
  uint64_t version = 0;
  bool operator==(const VersionSpan&) const = default;
};

enum class FinishReason : uint8_t { kStop = 0, kLength = 1, kAborted = 2 };
const char* finish_reason_name(FinishReason r);

struct Sample {
  std::vector<int32_t> prompt_tokens;
  std::vector<int32_t> response_tokens;
  std::vector<float> behaviour_logprobs;  // one per response token
  float reward = 0;
  std::vector<VersionSpan> version_spans;  // first start 0, strictly increasing starts
  FinishReason finish_reason = FinishReason::kStop;
  double generate_seconds = 0;
  // Routing replay (R3): the experts the rollout's router chose for every token it fed through
  // the model (the prompt, then every response token but the last, which is never fed), for
  // each MoE layer, in its top-k slots; token-major [routed_tokens() x routing_layers x
  // routing_top_k]. Empty when not recorded.
  std::vector<uint16_t> routed_experts;
  uint16_t routing_layers = 0;
  uint16_t routing_top_k = 0;
  size_t routed_tokens() const { return prompt_tokens.size() + response_tokens.size() - 1; }
};

// The result of one task unit: a group of samples with provenance and timing.
struct ExperienceRecord {
  std::string task_id;
  uint32_t attempt = 0;
  std::string worker_id;
  uint64_t cursor = 0;             // the task's data cursor, to regenerate it if stale
  int64_t leased_unix_ms = 0;      // when the worker leased the task
  int64_t finished_unix_ms = 0;    // when the record was complete
  double generate_seconds = 0;     // whole group
  double reward_seconds = 0;
  std::vector<Sample> samples;
};

// Dedupe key "task_id#attempt": one record per key reaches the trainer.
std::string dedupe_key(std::string_view task_id, uint32_t attempt);

// Oldest policy version among all spans of the record (0 if it has none).
uint64_t oldest_version(const ExperienceRecord& r);
// Newest policy version among all spans of the record (0 if it has none): above the oldest
// when a streaming worker swapped versions while the record's samples ran.
uint64_t newest_version(const ExperienceRecord& r);
// current_version - oldest_version, or 0 when the record is not older than current.
uint64_t staleness(const ExperienceRecord& r, uint64_t current_version);
// Sum over the record's response tokens of how many versions each is behind current_version
// (a token made by version v: current - v, 0 if not older). Over a batch, divided by its
// tokens, the per-token lag: a streaming worker's samples span versions, and their oldest
// version (staleness) overstates how old most of their tokens are.
uint64_t token_lag_sum(const ExperienceRecord& r, uint64_t current_version);
int64_t total_response_tokens(const ExperienceRecord& r);
// True when the group's rewards are not all equal (max - min > tol). An all-equal group has
// advantage 0 under every group estimator (GRPO, Dr.GRPO, RLOO), so dynamic sampling (DAPO)
// does not train on it.
bool has_signal(const ExperienceRecord& r, double tol = 1e-9);

// Field consistency (non-empty id, logprobs per token, span order). Throws moerl::Error
// naming the field; encode_* calls these first.
void validate(const TaskUnit& t);
void validate(const ExperienceRecord& r);

constexpr uint16_t kTaskRecordVersion = 1;
constexpr uint16_t kExperienceRecordVersion = 2;  // 2 adds routing replay; 1 is still read

std::string encode_task(const TaskUnit& t);
TaskUnit decode_task(std::string_view bytes);
std::string encode_experience(const ExperienceRecord& r);
ExperienceRecord decode_experience(std::string_view bytes);

}  // namespace moerl::runtime
