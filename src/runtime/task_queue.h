// TaskQueue: the interface between the controller (enqueues prompt groups) and rollout
// workers (lease, renew, ack, nack). Backends: InProcessTaskQueue (in_process_queue.h) and
// RedisTaskQueue (redis_queue.h). Delivery is at-least-once; the trainer dedupes.
//
//   queue.enqueue(task);
//   for (Lease& l : queue.lease("worker-3", 1, /*lease_seconds=*/30, Deadline::after_seconds(5))) {
//     ... work, calling queue.renew(l) well within lease_seconds ...
//     buffer.put(record);
//     queue.ack(l);                     // false: the lease was lost (expired and re-delivered)
//   }
// Lease semantics: a lease whose holder neither renews nor acks within lease_seconds is
// re-delivered to the next caller of lease(); after QueueOptions::max_deliveries deliveries a
// task goes to the dead-letter list instead. nack() hands a task back for immediate
// re-delivery. All backends are thread-safe; every blocking call takes a Deadline.
// Failures (Redis down past the deadline) throw moerl::Error(kUnavailable/kTimeout).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "runtime/records.h"

namespace moerl::runtime {

struct Lease {
  std::string lease_id;       // backend handle (Redis: stream entry id)
  std::string worker;         // holder
  uint32_t delivery_count = 0;  // 1 on first delivery
  double lease_seconds = 0;
  TaskUnit task;
};

struct QueueDepth {
  int64_t ready = 0;   // waiting for a worker (includes handed-back and expired leases)
  int64_t leased = 0;  // held by a worker now
  int64_t dead = 0;    // dead-lettered
  int64_t queued() const { return ready + leased; }
};

struct QueueStats {
  int64_t enqueued = 0;       // by this client
  int64_t acked = 0;
  int64_t requeued = 0;       // nacks + expired leases re-delivered (seen by this client)
  int64_t dead_lettered = 0;
};

struct QueueOptions {
  uint32_t max_deliveries = 5;  // deliveries before a task is dead-lettered
};

class TaskQueue {
 public:
  virtual ~TaskQueue() = default;
  virtual void enqueue(const TaskUnit& task, Deadline deadline) = 0;
  // Enqueues `task` and records `next_cursor` as the producer's position, atomically and
  // idempotently: if the recorded position is already >= next_cursor nothing is enqueued
  // (a retry, or a restarted controller replaying). Returns whether it enqueued.
  virtual bool enqueue_from(const TaskUnit& task, uint64_t next_cursor, Deadline deadline) = 0;
  // The recorded producer position (0 if none).
  virtual uint64_t producer_cursor(Deadline deadline) = 0;
  // Up to n tasks for `worker`; waits until at least one is available or the deadline passes
  // (then returns empty). Expired leases are re-delivered before fresh tasks.
  virtual std::vector<Lease> lease(const std::string& worker, int n, double lease_seconds,
                                   Deadline deadline) = 0;
  // Extends the lease by its lease_seconds. False when the lease is no longer held by this
  // worker (it expired and was taken by another, or was acked/nacked).
  virtual bool renew(const Lease& lease, Deadline deadline) = 0;
  // Completes the task. False when the lease was lost (then another worker owns the task).
  virtual bool ack(const Lease& lease, Deadline deadline) = 0;
  // Hands the task back for immediate re-delivery. False when the lease was lost.
  virtual bool nack(const Lease& lease, Deadline deadline) = 0;
  virtual QueueDepth depth(Deadline deadline) = 0;
  virtual std::vector<TaskUnit> dead_letters(Deadline deadline) = 0;
  virtual QueueStats stats() const = 0;
  // Fences this client's enqueue/enqueue_from with the trainer lease's epoch
  // (runtime/trainer_lease.h): once another trainer took the namespace (a later epoch), they
  // throw instead of writing, so a replaced trainer that wakes cannot add tasks its successor
  // never created. 0 (the default) writes unfenced; workers never enqueue.
  virtual void set_epoch(uint64_t epoch) = 0;
};

}  // namespace moerl::runtime
