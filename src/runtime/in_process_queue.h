// In-process backends: a TaskQueue and an ExperienceBuffer for the trainer and rollout
// workers running as threads of one process (the embedded default of `moerl train --mode async`).
//
//   auto queue = std::make_shared<InProcessTaskQueue>(QueueOptions{.max_deliveries = 5});
//   auto buffer = std::make_shared<InProcessExperienceBuffer>();
//   // share both with the trainer thread and every worker thread
// Thread-safe: one mutex per object, condition variables for waiting; every wait is bounded
// by the caller's Deadline. Lease expiry is checked lazily by lease() and depth().
// State lives in memory only: snapshot() is how a trainer checkpoint keeps it.
#pragma once

#include <condition_variable>
#include <functional>
#include <deque>
#include <map>
#include <mutex>
#include <set>

#include "runtime/dedupe_window.h"
#include "runtime/experience_buffer.h"
#include "runtime/task_queue.h"

namespace moerl::runtime {

class InProcessTaskQueue : public TaskQueue {
 public:
  explicit InProcessTaskQueue(QueueOptions options = {});
  void enqueue(const TaskUnit& task, Deadline deadline) override;
  bool enqueue_from(const TaskUnit& task, uint64_t next_cursor, Deadline deadline) override;
  uint64_t producer_cursor(Deadline deadline) override;
  void set_epoch(uint64_t) override {}  // one process: nothing to fence
  std::vector<Lease> lease(const std::string& worker, int n, double lease_seconds,
                           Deadline deadline) override;
  bool renew(const Lease& lease, Deadline deadline) override;
  bool ack(const Lease& lease, Deadline deadline) override;
  bool nack(const Lease& lease, Deadline deadline) override;
  QueueDepth depth(Deadline deadline) override;
  std::vector<TaskUnit> dead_letters(Deadline deadline) override;
  QueueStats stats() const override;

 private:
  void enqueue_locked(const TaskUnit& task);
  using Clock = std::chrono::steady_clock;
  struct Entry {
    TaskUnit task;
    uint32_t deliveries = 0;
    bool leased = false;
    std::string holder;
    Clock::time_point expires;
    double lease_seconds = 0;
  };
  // Finds the entry a lease refers to if `lease` still holds it; requires mu_.
  Entry* held(const Lease& lease, uint64_t* seq);
  void reclaim_expired_locked(Clock::time_point now);

  const QueueOptions options_;  // immutable after construction
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_seq_ = 1;             // guarded by mu_
  std::map<uint64_t, Entry> entries_;  // every task not yet acked or dead; guarded by mu_
  std::deque<uint64_t> ready_;        // seqs waiting for delivery, front first; guarded by mu_
  std::vector<TaskUnit> dead_;        // guarded by mu_
  QueueStats stats_;                  // guarded by mu_
  uint64_t producer_cursor_ = 0;      // guarded by mu_
};

class InProcessExperienceBuffer : public ExperienceBuffer {
 public:
  void put(const ExperienceRecord& record, Deadline deadline) override;
  std::vector<ExperienceRecord> take(size_t n, Deadline deadline) override;
  void unget(std::vector<ExperienceRecord> records) override;
  BufferSnapshot snapshot() override;
  void restore(const BufferSnapshot& snapshot, Deadline deadline) override;
  void checkpoint_committed(const BufferSnapshot& snapshot, Deadline deadline) override {}
  BufferStats stats() const override;
  void settle_below(uint64_t cursor) override;
  void set_quarantine(RecordCheck check, QuarantineHandler on_quarantine) override;
  void set_epoch(uint64_t) override {}  // one process: nothing to fence
  // Refused records, oldest first (the in-process dead-letter store).
  std::vector<ExperienceRecord> quarantined() const;

 private:
  void quarantine(ExperienceRecord r, std::string why);  // mu_ held
  mutable std::mutex mu_;
  std::condition_variable cv_;
  RecordCheck check_;                   // guarded by mu_
  QuarantineHandler on_quarantine_;     // guarded by mu_
  std::vector<ExperienceRecord> quarantined_;  // guarded by mu_
  std::deque<ExperienceRecord> ready_;  // put, not yet taken; guarded by mu_
  std::deque<ExperienceRecord> ungot_;  // handed back by the trainer; guarded by mu_
  DedupeWindow seen_;                   // dedupe keys handed out; guarded by mu_
  uint64_t num_put_total_ = 0;          // the cursor: records ever put; guarded by mu_
  BufferStats stats_;                   // guarded by mu_
};

// Waits on `cv` until `ready()` or `deadline`; never waits unboundedly even for
// Deadline::never() (re-checks hourly). Returns ready().
bool wait_for_condition(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                        const Deadline& deadline, const std::function<bool()>& ready,
                        std::chrono::steady_clock::time_point wake_at =
                            std::chrono::steady_clock::time_point::max());

}  // namespace moerl::runtime
