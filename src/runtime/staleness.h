// Staleness filter for the trainer: records whose oldest token span is more than
// max_staleness policy versions behind are dropped, or handed back for regeneration.
// Every record's lag goes into the accounting histogram.
//
//   StaleFilter f{.max_staleness = 2, .policy = StalePolicy::kRegenerate};
//   auto [keep, stale] = f.apply(std::move(batch), current_version, &acc);
//   for (auto& r : stale) queue.enqueue(rebuild_task(r.cursor, r.attempt + 1), d);  // kRegenerate
// Pure apart from the Accounting it updates; thread-safe if the Accounting is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/accounting.h"
#include "runtime/records.h"

namespace moerl::runtime {

enum class StalePolicy { kDrop, kRegenerate };
StalePolicy parse_stale_policy(const std::string& name);  // "drop" | "regenerate"
const char* stale_policy_name(StalePolicy p);

struct StaleSplit {
  std::vector<ExperienceRecord> keep;   // within max_staleness: train (with the behaviour correction)
  std::vector<ExperienceRecord> stale;  // over the bound: dropped, or to regenerate (attempt + 1)
};

struct StaleFilter {
  uint64_t max_staleness = 1;
  StalePolicy policy = StalePolicy::kDrop;
  // Counts, per record: staleness histogram; kept -> tasks_completed; stale -> stale_dropped
  // and, under kDrop, tasks_completed, under kRegenerate, tasks_requeued (the caller
  // re-enqueues). `acc` may be null.
  StaleSplit apply(std::vector<ExperienceRecord> records, uint64_t current_version,
                   Accounting* acc) const;
};

}  // namespace moerl::runtime
