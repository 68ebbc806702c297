// Run accounting for the asynchronous runtime: task/sample counters, the staleness
// histogram, queue depth and per-role idle fractions, exported as JSON for summary.json
// ("accounting") and metrics.jsonl. Holds no policy: callers count what happened.
//
//   Accounting acc;
//   acc.add(Counter::kTasksCreated, 64);
//   acc.record_staleness(2);
//   acc.add_role_time(Role::kTrainer, /*busy=*/1.5, /*idle=*/0.2);
//   nlohmann::json j = acc.report(/*still_queued=*/depth.queued()).to_json();
// Thread-safe (atomics + one mutex for the histogram); report() is a consistent-enough
// snapshot for metrics (counters are read one by one).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>

#include <nlohmann/json.hpp>

namespace moerl::runtime {

enum class Counter : int {
  kTasksCreated = 0,
  kTasksCompleted,     // unique records the trainer is done with (trained, or stale under kDrop)
  kSamplesTrained,
  kSamplesGenerated,   // by rollout workers
  kDuplicatesDropped,
  kStaleDropped,
  kTasksRequeued,      // handed back (drain, stale regeneration) or expired and re-delivered
  kDeadLettered,
  kGroupsFiltered,     // completed records not trained: all rewards equal (dynamic sampling)
  kRecordsQuarantined, // records refused at the trainer boundary (not decodable, or insane)
  kTasksAbandoned,     // tasks given up after kMaxQuarantinedAttempts quarantined records
  kDeadLineage,        // records generated with a lost trainer life's weights: dropped, task re-created
  kCount,
};
const char* counter_name(Counter c);

enum class Role : int { kTrainer = 0, kRollout = 1, kCount = 2 };

struct AccountingReport {
  std::array<int64_t, static_cast<int>(Counter::kCount)> counters{};
  int64_t still_queued = 0;
  // created - completed - still_queued - dead_lettered - tasks_abandoned; 0 in a healthy run
  int64_t lost = 0;
  std::map<uint64_t, int64_t> staleness_histogram;  // versions behind -> records
  int64_t queue_depth = 0;
  double trainer_idle_fraction = 0;
  double rollout_idle_fraction = 0;
  double trainer_samples_per_second = 0;  // samples_trained / trainer wall time
  double rollout_samples_per_second = 0;  // samples_generated / rollout wall time (summed)
  int64_t get(Counter c) const { return counters[static_cast<int>(c)]; }
  nlohmann::json to_json() const;
};

class Accounting {
 public:
  void add(Counter c, int64_t n = 1) { counters_[static_cast<int>(c)].fetch_add(n); }
  int64_t get(Counter c) const { return counters_[static_cast<int>(c)].load(); }
  // Mirrors a count kept elsewhere (e.g. BufferStats::duplicates_dropped).
  void set(Counter c, int64_t value) { counters_[static_cast<int>(c)].store(value); }
  void record_staleness(uint64_t versions_behind);
  void set_queue_depth(int64_t depth) { queue_depth_.store(depth); }
  // Wall time of one role split into busy (generating / training) and idle (waiting on the
  // queue / buffer). Rollout times from several workers add up.
  void add_role_time(Role role, double busy_seconds, double idle_seconds);
  // `still_queued`: tasks not yet completed that the queue still holds (ready + leased),
  // plus records in the buffer not yet taken.
  AccountingReport report(int64_t still_queued) const;
  // Counters, histogram and role times as JSON, for trainer checkpoints; load_state()
  // replaces the current values with a saved state (throws moerl::Error on a malformed one).
  nlohmann::json state() const;
  void load_state(const nlohmann::json& state);

 private:
  std::array<std::atomic<int64_t>, static_cast<int>(Counter::kCount)> counters_{};
  std::atomic<int64_t> queue_depth_{0};
  mutable std::mutex mu_;
  std::map<uint64_t, int64_t> staleness_;  // guarded by mu_
  std::array<double, 2> busy_{};           // guarded by mu_
  std::array<double, 2> idle_{};           // guarded by mu_
};

}  // namespace moerl::runtime
