// Sense checks of an experience record at the trainer boundary. The CRC proves a record
// arrived as written, not that it makes sense to train on: a token id outside the vocabulary
// crashes the embedding lookup, a NaN log-prob reaches the weights. The trainer refuses what
// fails and quarantines it (ExperienceBuffer::set_quarantine; docs/runtime.md, "Quarantine").
//
//   RecordLimits lim{.vocab_size = 151936, .group_size = 8, .max_version = published};
//   if (std::string why = check_record(rec, lim); !why.empty()) quarantine(rec, why);
// Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/records.h"

namespace moerl::runtime {

// What the trainer can take. A zero field is not checked.
struct RecordLimits {
  int64_t vocab_size = 0;         // every prompt and response token id in [0, vocab_size)
  uint32_t group_size = 0;        // samples per record
  uint16_t routing_layers = 0;    // routing replay, when a sample carries it: MoE layers,
  uint16_t routing_top_k = 0;     // top-k slots per layer,
  uint32_t num_experts = 0;       // and expert ids in [0, num_experts)
  uint64_t max_version = 0;       // newest policy version published (0: only version 0 exists)
  bool check_version = true;      // span versions <= max_version
};

// "" when the record passes, else the first failure, naming the record, the sample and the
// field ("c17#0 sample 2: response token 5 is id 70000, outside the vocabulary [0, 151936)").
// Also runs the format's own consistency rules (validate()), for records built in memory.
std::string check_record(const ExperienceRecord& r, const RecordLimits& limits);

}  // namespace moerl::runtime
