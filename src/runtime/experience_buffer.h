// ExperienceBuffer: rollout workers put() experience records; the trainer take()s them,
// deduplicated by (task_id, attempt) so at-least-once delivery upstream never trains a group
// twice (within a window bounded by the tasks in flight: settle_below). snapshot()/restore() carry the buffer's state and the read cursor in trainer
// checkpoints. Backends: InProcessExperienceBuffer, RedisExperienceBuffer.
//
//   buffer.put(record, Deadline::after_seconds(10));                 // worker, then ack the task
//   auto batch = buffer.take(16, Deadline::after_seconds(60));       // trainer; may return < 16
//   std::string state = buffer.snapshot().encode();                  // into the checkpoint
//   buffer.restore(BufferSnapshot::decode(state));                   // after a trainer restart
// Thread-safe. Only one trainer process takes from a buffer (data-parallel ranks receive the
// batch from rank 0). Redis failures past the deadline throw moerl::Error.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "runtime/records.h"

namespace moerl::runtime {

struct BufferStats {
  int64_t put = 0;                 // records put by this client
  int64_t taken = 0;               // unique records handed to the trainer
  int64_t duplicates_dropped = 0;  // records whose (task_id, attempt) was already taken
  int64_t quarantined = 0;         // records refused at take() since this process started
  int64_t available = 0;           // records waiting (in-process exact; Redis: fetched, not taken)
};

// Trainer-side state that a checkpoint must carry so that, after a restart, no record is
// trained twice and none is skipped.
struct BufferSnapshot {
  std::string cursor;                     // backend read position (Redis: last stream id read)
  // Dedupe keys already handed out (or reserved), each with its task's data cursor, above
  // the settled watermark (runtime/dedupe_window.h).
  std::map<std::string, uint64_t> seen;
  uint64_t settled_below = 0;             // every task below this data cursor is settled
  std::vector<ExperienceRecord> pending;  // records read but not yet handed out (deduped on take)
  std::vector<ExperienceRecord> ungot;    // handed out, then handed back by unget()
  int64_t duplicates_dropped = 0;
  int64_t taken = 0;
  // The controller's next dataset index at checkpoint time (set and read by the caller; the
  // buffer does not use it). Tasks enqueued after it are enqueued again on restart; their
  // duplicates are dropped by the dedupe set.
  uint64_t data_cursor = 0;
  // Opaque caller state carried with the snapshot (AsyncController: accounting as JSON).
  std::string extra;
  std::string encode() const;             // binary, magic "MRBS", version 2, crc32c
  static BufferSnapshot decode(std::string_view bytes);
};

// A record take() refused: one that does not decode (bad CRC, truncation, unknown version,
// inconsistent fields) or that the RecordCheck refused.
struct QuarantinedRecord {
  std::string entry_id;   // where it was (Redis: the stream entry id; in-process: "put-N")
  std::string task_id;    // as the record (or, undecoded, the entry's `key` field) claims; may be empty
  uint32_t attempt = 0;
  bool decoded = false;   // false: task_id/attempt come from the entry's key field, unverified
  uint64_t cursor = 0;    // the record's data cursor (decoded records only)
  bool key_taken = false; // a record with this task_id#attempt was already handed out
  std::string reason;
};
// Judges a decoded record at the trainer boundary: "" accepts it, else the reason it is
// refused (runtime/record_check.h).
using RecordCheck = std::function<std::string(const ExperienceRecord&)>;
// Told of each refused record inside take(), before its next record is judged; returns the
// task's data cursor to reserve the refused record's dedupe key under (the caller regenerates
// the task under another attempt, so a late copy of the refused one must not be trained), or
// nullopt to reserve nothing. Must not block.
using QuarantineHandler = std::function<std::optional<uint64_t>(const QuarantinedRecord&)>;

class ExperienceBuffer {
 public:
  virtual ~ExperienceBuffer() = default;
  virtual void put(const ExperienceRecord& record, Deadline deadline) = 0;
  // Waits until n unique records are available or the deadline passes, and returns what it
  // has (possibly fewer, possibly none). Duplicates are dropped and counted.
  virtual std::vector<ExperienceRecord> take(size_t n, Deadline deadline) = 0;
  // Records handed back by the trainer (e.g. ones it could not fit in this step) are
  // returned first by the next take(); their dedupe keys stay reserved.
  virtual void unget(std::vector<ExperienceRecord> records) = 0;
  virtual BufferSnapshot snapshot() = 0;
  virtual void restore(const BufferSnapshot& snapshot, Deadline deadline) = 0;
  // Called once the checkpoint holding `snapshot` is durable: backends may free what it
  // covers (Redis: XTRIM the experience stream below the cursor).
  virtual void checkpoint_committed(const BufferSnapshot& snapshot, Deadline deadline) = 0;
  virtual BufferStats stats() const = 0;
  // Every task with a data cursor below `cursor` is settled for good (the caller will not
  // train another record of it): their dedupe keys are forgotten and records of them read
  // from now on are dropped as duplicates. Bounds the dedupe set by the tasks in flight.
  // Never lowers the watermark; carried in snapshots.
  virtual void settle_below(uint64_t cursor) = 0;
  // Records take() reads from now on are judged by `check` (empty: decode checks only); a
  // refused one is not handed out: it is copied to the dead-letter store (Redis: stream
  // NS:experience:quarantine with its id, key, reason and raw bytes), acked, counted, logged,
  // and passed to `on_quarantine` (may be empty). A rewind to an older snapshot reads it
  // again and judges it again (the caller's accounting rewinds with the snapshot); the
  // dead-letter store still holds it once (Redis: keyed by the entry id). Read again without
  // a rewind (a Redis restarted from an older AOF), it is refused as before, not judged,
  // counted or passed to `on_quarantine` again. Call before the first take().
  virtual void set_quarantine(RecordCheck check, QuarantineHandler on_quarantine) = 0;
  // The trainer life that reads from now on (its TrainerLease epoch). Redis reads through
  // the consumer group "trainer-<epoch>" (restore() creates it and removes the groups of
  // earlier lives), so a replaced trainer's last reads never move its successor's position.
  // In-process: no effect. Call before restore().
  virtual void set_epoch(uint64_t epoch) = 0;
};

}  // namespace moerl::runtime
