// AsyncController: the trainer-side half of asynchronous RL. It keeps the task queue topped
// up from the dataset (a TaskFactory maps a data cursor to a task unit), hands the trainer
// batches of experience within max_staleness, drops or regenerates stale records, measures
// trainer idle time, and carries its state (buffer snapshot, data cursor, accounting) in
// trainer checkpoints.
//
//   AsyncController ctl(cfg, *queue, *buffer, [&](uint64_t cursor, uint32_t attempt) {
//     return task_from_dataset(cursor, attempt); }, &acc);
//   while (!ctl.finished()) {
//     auto batch = ctl.next_batch(groups_per_step, policy_version, Deadline::after_seconds(600));
//     train(batch); acc.add(Counter::kSamplesTrained, samples_in(batch));
//     if (checkpoint_due) save(ctl.snapshot().encode());
//   }
// Not thread-safe: one trainer thread drives it (queue and buffer themselves are shared).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "runtime/accounting.h"
#include "runtime/experience_buffer.h"
#include "runtime/kept_fraction.h"
#include "runtime/lineage.h"
#include "runtime/staleness.h"
#include "runtime/task_queue.h"

namespace moerl::runtime {

struct ControllerConfig {
  int64_t total_tasks = 0;   // tasks to create over the run (0 = no limit); each stale
                             // group dropped under kDrop adds one (a fresh prompt replaces it)
  int64_t queue_ahead = 8;   // keep this many tasks ahead of training (queued, leased, or
                             // generated and waiting in the buffer)
  uint64_t first_cursor = 0; // data cursor of the first task
  StaleFilter stale;
  // Dynamic sampling (DAPO): records whose rewards are all equal complete their task but are
  // not trained (groups_filtered). top_up then keeps about queue_ahead / (fraction kept) tasks
  // ahead, plus a margin for the spread of the kept count, at most queue_ahead *
  // max_queue_factor, so the trainer still gets full batches.
  bool drop_no_signal = false;
  int64_t max_queue_factor = 4;
  double call_timeout_seconds = 30;
  // Trainer-boundary checks of every record taken (runtime/record_check.h); empty: decode
  // checks only. A refused record is quarantined (ExperienceBuffer::set_quarantine) and its
  // task, when it is one of this run's and not yet trained, is enqueued again (attempt + 1).
  RecordCheck check;
  // The data cursor a task id names, to re-create the task of a record that did not decode
  // (only its stream key survives); empty or nullopt: only decoded records' tasks are re-created.
  std::function<std::optional<uint64_t>(const std::string& task_id)> task_cursor;
  // The trainer's version lineage (runtime/lineage.h), owned by the caller and extended as it
  // publishes; records generated with a version outside it are dropped (records_dead_lineage)
  // and their tasks, when this run still waits for them, enqueued again (attempt + 1).
  // nullptr: every version is trusted.
  const VersionLineage* lineage = nullptr;
  void validate() const;
};

// Quarantined records of one task after which the task is given up (tasks_abandoned).
constexpr uint32_t kMaxQuarantinedAttempts = 4;

using TaskFactory = std::function<TaskUnit(uint64_t cursor, uint32_t attempt)>;

class AsyncController {
 public:
  AsyncController(ControllerConfig config, TaskQueue& queue, ExperienceBuffer& buffer,
                  TaskFactory factory, Accounting* accounting);
  ~AsyncController();  // detaches from the buffer's quarantine
  // Enqueues new tasks until `queue_ahead` are ahead (queued + records waiting in the buffer)
  // or total_tasks were created. Returns how many it enqueued.
  int64_t top_up(Deadline deadline);
  // Up to n records (task groups) fresh enough for `current_version`; waits until it has n or
  // the deadline passes. Stale records are dropped or their tasks re-enqueued (attempt + 1);
  // under drop_no_signal, records without a reward spread are dropped. Returns early (short)
  // once every task was created and the queue is empty: nothing more can arrive.
  std::vector<ExperienceRecord> next_batch(size_t n, uint64_t current_version, Deadline deadline);
  // All total_tasks created and each completed (trained, or stale under kDrop) or dead.
  bool finished(Deadline deadline);
  uint64_t data_cursor() const { return cursor_; }
  // Buffer snapshot + data cursor + accounting, for the trainer checkpoint.
  BufferSnapshot snapshot();
  void restore(const BufferSnapshot& snapshot, Deadline deadline);
  // Accounting with still_queued = queue depth (+ records waiting in an in-process buffer).
  AccountingReport report(Deadline deadline);

 private:
  const ControllerConfig config_;
  TaskQueue& queue_;
  ExperienceBuffer& buffer_;
  const TaskFactory factory_;
  Accounting* const acc_;
  Accounting own_acc_;          // used when the caller passes none
  uint64_t cursor_;             // next dataset index to enqueue
  double last_return_ = 0;      // when next_batch last returned (trainer busy since then)
  double outage_since_ = 0;     // when the buffer became unavailable (0: it answers)
  KeptFraction kept_;           // records kept by drop_no_signal
  // Stale tasks enqueued again (task id -> cursor, attempt), until a fresh record of them is
  // kept; carried in snapshots so a restart on an empty queue can enqueue them again.
  std::map<std::string, std::pair<uint64_t, uint32_t>> regenerating_;
  uint64_t recorded_ = 0;       // the producer cursor as the queue last confirmed it
  int64_t queue_target() const;
  // The queue's producer cursor fell below what it had confirmed: its server lost its last
  // writes (Redis restarted from an older AOF). Creates the forgotten tasks again (from
  // `recorded`) and re-enqueues every regeneration in flight.
  void recover_lost_writes(uint64_t recorded, Deadline deadline);
  // Enqueues again the tasks in [from, snapshot.data_cursor) that the snapshot does not show
  // as handed out or buffered (a queue that lost its contents in a restart).
  void requeue_lost(const BufferSnapshot& snapshot, uint64_t from, Deadline deadline);
  // buffer_.take() into `got`; false (nothing taken) while the buffer is unavailable, for up
  // to call_timeout_seconds of outage, then an Error naming it.
  bool take_riding_outages(size_t n, Deadline slice, std::vector<ExperienceRecord>& got);
  int64_t task_budget() const;  // total_tasks + the stale groups dropped (each replaced)
  bool exhausted() const;       // the whole task budget created
  // The buffer's QuarantineHandler (called inside take(); no I/O): counts the record and,
  // when its task is one of this run's still waiting for this attempt, schedules the task
  // again (attempt + 1) and returns its cursor so the refused attempt's key stays consumed.
  std::optional<uint64_t> on_quarantine(const QuarantinedRecord& q);
  // Schedules `task_id` again under attempt + 1 when it is one this run created (its cursor,
  // from config.task_cursor or `cursor`) and the run still waits for `attempt`; returns the
  // task's cursor when it did (or gave the task up), else nullopt. `limited`: count the
  // attempt against kMaxQuarantinedAttempts.
  std::optional<uint64_t> reschedule(const std::string& task_id, uint32_t attempt, std::optional<uint64_t> cursor, bool limited,
                  const std::string& why);
  // Takes the records of versions outside config.lineage out of `got` (counted, rescheduled).
  void drop_dead_lineage(std::vector<ExperienceRecord>& got);
  std::vector<std::pair<uint64_t, uint32_t>> requeue_;  // (cursor, attempt) to enqueue
  // Settlement: a task is settled once it needs no record ever again (one was trained or
  // filtered, it was dropped stale, given up, or dead-lettered). Every task below
  // settled_below_ is settled; settled_ holds those above it. The buffer forgets the dedupe
  // keys below the watermark (ExperienceBuffer::settle_below), which bounds its memory.
  uint64_t settled_below_;
  std::set<uint64_t> settled_;
  int64_t dead_settled_ = 0;    // dead letters already settled
  uint64_t pushed_below_ = UINT64_MAX;  // the watermark the buffer was last told
  // Marks a task settled (no I/O: on_quarantine calls it inside take()); push_watermark()
  // tells the buffer, outside take().
  void settle(uint64_t cursor);
  void push_watermark();
  void settle_record(const ExperienceRecord& r);  // its task, when the record names it truly
  bool settled(uint64_t cursor) const { return cursor < settled_below_ || settled_.count(cursor) > 0; }
  // Settles the tasks the queue dead-lettered since the last call (`dead`: its count now).
  void settle_dead_letters(int64_t dead, Deadline deadline);
};

}  // namespace moerl::runtime
