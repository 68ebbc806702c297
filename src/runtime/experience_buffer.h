// ExperienceBuffer: rollout workers put() experience records; the trainer take()s them,
// deduplicated by (task_id, attempt) so at-least-once delivery upstream never trains a group
// twice. snapshot()/restore() carry the buffer's state and the read cursor in trainer
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
#include <map>
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
  int64_t available = 0;           // records waiting (in-process exact; Redis: fetched, not taken)
};

// Trainer-side state that a checkpoint must carry so that, after a restart, no record is
// trained twice and none is skipped.
struct BufferSnapshot {
  std::string cursor;                     // backend read position (Redis: last stream id read)
  std::set<std::string> seen;             // dedupe keys already handed out
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
  std::string encode() const;             // binary, magic "MRBS", version 1, crc32c
  static BufferSnapshot decode(std::string_view bytes);
};

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
};

}  // namespace moerl::runtime
