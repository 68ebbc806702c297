// Redis Streams backends (Redis 7): RedisTaskQueue over a consumer group, and
// RedisExperienceBuffer read by the trainer with its own group. Keys, for namespace NS:
//   NS:tasks          task stream (field "task" = encoded TaskUnit); group "rollout"
//   NS:tasks:dead     dead-letter stream (fields "task", "deliveries", "worker")
//   NS:tasks:cursor   the producer's next dataset index (enqueue_from)
// Enqueues check NS:trainer:epoch against set_epoch's (the trainer lease's fence) atomically.
//   NS:experience     experience stream (fields "rec" = encoded ExperienceRecord, "key"); group
//                     "trainer-<epoch>" per trainer life (set_epoch; "trainer" before one is set)
//   NS:experience:quarantine      records take() refused (fields "id" = the entry id, "key",
//                                 "reason", "rec"); one entry per experience entry, indexed by
//   NS:experience:quarantine:ids  a sorted set of those entry ids (score: their ms part)
//
//   RedisTaskQueue q(parse_redis_url(url), "job42");
//   auto leases = q.lease("pod-7", 1, 30, Deadline::after_seconds(5));
// Mapping: lease = XREADGROUP (own pending with id 0 on the first call, then XAUTOCLAIM of
// entries idle past lease_seconds, then ">"); renew = XCLAIM to self JUSTID (resets idle);
// ack = XACK + XDEL; nack = XCLAIM to the "__handback__" consumer with a huge IDLE so the next
// XAUTOCLAIM takes it at once; delivery counts come from XPENDING; after max_deliveries the
// entry moves to NS:tasks:dead. renew/ack/nack/dead-letter run as Lua scripts that first check
// that the entry is still pending for this worker with the same delivery count, so a worker
// whose lease was taken over cannot touch the new holder's lease.
// All workers must use the same lease_seconds (it is the XAUTOCLAIM min-idle time).
// Thread-safe (two connections: one for blocking reads, one for the rest). Every call takes a
// deadline; connection loss is retried with backoff until it (see RedisClient).
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/dedupe_window.h"
#include "runtime/experience_buffer.h"
#include "runtime/redis_client.h"
#include "runtime/task_queue.h"

namespace moerl::runtime {

// Every key moerl writes in a namespace (validated: no spaces or braces).
struct RedisKeys {
  explicit RedisKeys(const std::string& ns);
  std::string tasks, dead, producer_cursor, experience, quarantine, quarantine_ids, weights, weights_latest;
  std::string trainer_lease, trainer_epoch;  // runtime/trainer_lease.h
  // The keys that hold one run's work (tasks, cursor, experience, quarantine), which a fresh
  // run removes (runtime/namespace_reset.h); the others identify trainers and weight versions.
  std::vector<std::string> run_state() const;
  static constexpr const char* kTaskGroup = "rollout";
  static constexpr const char* kTrainerGroup = "trainer";
  static constexpr const char* kHandback = "__handback__";
};

class RedisTaskQueue : public TaskQueue {
 public:
  RedisTaskQueue(const RedisUrl& url, const std::string& ns, QueueOptions options = {},
                 RedisOptions redis = {});
  void enqueue(const TaskUnit& task, Deadline deadline) override;
  bool enqueue_from(const TaskUnit& task, uint64_t next_cursor, Deadline deadline) override;
  uint64_t producer_cursor(Deadline deadline) override;
  std::vector<Lease> lease(const std::string& worker, int n, double lease_seconds,
                           Deadline deadline) override;
  bool renew(const Lease& lease, Deadline deadline) override;
  bool ack(const Lease& lease, Deadline deadline) override;
  bool nack(const Lease& lease, Deadline deadline) override;
  QueueDepth depth(Deadline deadline) override;
  std::vector<TaskUnit> dead_letters(Deadline deadline) override;
  QueueStats stats() const override;
  void set_epoch(uint64_t epoch) override { epoch_ = epoch; }
  int64_t reconnects() const { return reader_.reconnects() + control_.reconnects(); }

 private:
  struct Entry {
    std::string id;
    std::string task_bytes;  // empty if the entry was deleted while pending
  };
  void ensure_group(Deadline deadline);
  // Runs a group command; on NOGROUP (stream lost) recreates the group and retries once.
  RedisReply group_command(RedisClient& c, const std::vector<std::string>& argv,
                           Deadline deadline, double block_seconds = 0);
  // Turns read/claimed entries into leases; dead-letters over-delivered ones.
  void admit(const std::vector<Entry>& entries, const std::string& worker, bool fresh,
             double lease_seconds, Deadline deadline, std::vector<Lease>* out);
  uint32_t delivery_count(const std::string& id, const std::string& worker, Deadline deadline);
  bool owned_script(const char* action, const Lease& lease, Deadline deadline);
  // The fenced enqueue script; next_cursor 0 enqueues unconditionally. Returns whether it
  // enqueued; throws once the namespace's trainer epoch is not epoch_ (when epoch_ != 0).
  bool fenced_enqueue(const TaskUnit& task, uint64_t next_cursor, Deadline deadline);

  const std::string ns_;
  const RedisKeys keys_;
  const QueueOptions options_;
  RedisClient reader_;   // lease(): XREADGROUP BLOCK / XAUTOCLAIM
  RedisClient control_;  // everything else
  mutable std::mutex mu_;
  std::set<std::string> recovered_;  // workers whose own pending was read; guarded by mu_
  QueueStats stats_;                 // guarded by mu_
  std::atomic<uint64_t> epoch_{0};   // set_epoch: the fence of enqueue writes
};

class RedisExperienceBuffer : public ExperienceBuffer {
 public:
  // `consumer` names the trainer in the group (one trainer reads a buffer).
  RedisExperienceBuffer(const RedisUrl& url, const std::string& ns,
                        std::string consumer = "trainer", RedisOptions redis = {});
  void put(const ExperienceRecord& record, Deadline deadline) override;
  std::vector<ExperienceRecord> take(size_t n, Deadline deadline) override;
  void unget(std::vector<ExperienceRecord> records) override;
  BufferSnapshot snapshot() override;
  // Rewinds the trainer group to the snapshot's cursor (XGROUP SETID) so records put after
  // the checkpoint are read again; records up to the cursor come from the snapshot itself.
  void restore(const BufferSnapshot& snapshot, Deadline deadline) override;
  // XTRIM MINID: frees stream entries older than the checkpoint's cursor.
  void checkpoint_committed(const BufferSnapshot& snapshot, Deadline deadline) override;
  BufferStats stats() const override;
  void settle_below(uint64_t cursor) override;
  void set_quarantine(RecordCheck check, QuarantineHandler on_quarantine) override;
  void set_epoch(uint64_t epoch) override;

 private:
  // Re-creates our group at the last id read (it vanished: removed by a successor, or a
  // Redis that lost it), so reading goes on where it was.
  void ensure_group(Deadline deadline);
  // XGROUP CREATE <group> at `id` (MKSTREAM); false when it already exists (BUSYGROUP).
  bool create_group(const std::string& group, const std::string& id, Deadline deadline);
  std::string group() const;  // group_, read under mu_
  // take()'s reads: appends to `out` as it goes, so take() can hand back what was read when
  // a later call throws.
  void take_into(size_t n, Deadline deadline, std::vector<ExperienceRecord>& out);
  // XGROUP DESTROY every trainer group but ours (earlier lives').
  void remove_other_groups(Deadline deadline);
  // Judges one entry read by take() (mu_ held): the decoded record, or nullopt when it is
  // refused (then *refused says why and which task it claims).
  std::optional<ExperienceRecord> admit(const std::string& entry_id, const std::string& bytes,
                                        const std::string* key, QuarantinedRecord* refused);
  // XADD NS:experience:quarantine (id, key, reason, raw bytes) unless the entry is there.
  void move_to_quarantine(const QuarantinedRecord& q, const std::string& bytes, Deadline deadline);

  const RedisKeys keys_;
  const std::string consumer_;
  RedisClient reader_;
  RedisClient writer_;
  mutable std::mutex mu_;  // guards everything below; never held across a blocking read
  std::string group_ = RedisKeys::kTrainerGroup;
  std::string cursor_ = "0-0";           // last experience stream id read
  DedupeWindow seen_;
  std::deque<ExperienceRecord> ungot_;
  RecordCheck check_;
  QuarantineHandler on_quarantine_;
  // Entries refused since restore(), by entry id, until a committed checkpoint passes them: one
  // read again in this life (a Redis restarted from an older AOF forgets how far the group had
  // read) is refused again as it was, not judged, counted or handed to on_quarantine_ twice.
  std::map<std::string, QuarantinedRecord> refused_;
  BufferStats stats_;
};

}  // namespace moerl::runtime
