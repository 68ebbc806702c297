// run_worker_loop: the model-agnostic skeleton of a rollout worker. It leases up to
// tasks_per_lease task units at a time and hands the whole batch to `process` (one batched
// generate call), renewing the leases on a background thread while it runs; then, per
// record, it puts the record into the experience buffer and acks its task. On a drain
// (SIGTERM, Spot notice) it stops leasing, starts a batch only if it is expected to finish
// before the drain deadline, nacks the rest so another worker takes them at once, and
// returns exit code 0. The generation engine lives in `process`.
//
//   WorkerLoopConfig cfg{.worker_id = "pod-3", .tasks_per_lease = 8, .lease_seconds = 30};
//   WorkerLoopResult r = run_worker_loop(cfg, queue, buffer, drain,
//       [&](const std::vector<Lease>& leases, const WorkContext& ctx) {
//         std::vector<std::optional<ExperienceRecord>> out(leases.size());  // nullopt = hand back
//         while (decoding) { if (ctx.should_abort()) return out; ... }
//         for (size_t i = 0; i < leases.size(); ++i) out[i] = record_of(leases[i].task);
//         return out;   // one entry per lease, in order
//       });
//   return r.exit_code;
// Thread-safety: run it on one thread per worker; queue/buffer may be shared (they are
// thread-safe). Queue/buffer errors (Redis down past call_timeout_seconds) are logged and
// retried until the drain deadline. `process` exceptions, and a result that does not match
// the batch (size, task_id/attempt: moerl::Error kInternal), propagate after every lease not
// yet put is handed back.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/accounting.h"
#include "runtime/drain.h"
#include "runtime/experience_buffer.h"
#include "runtime/task_queue.h"

namespace moerl::runtime {

struct WorkerLoopConfig {
  std::string worker_id;
  int tasks_per_lease = 1;
  double lease_seconds = 30;
  double renew_seconds = 0;          // renew period; 0 = lease_seconds / 3
  double poll_seconds = 1.0;         // how long one lease() call waits for work
  double call_timeout_seconds = 30;  // deadline of each queue / buffer call
  int64_t max_tasks = 0;             // stop (cleanly) after this many completed; 0 = no limit
  double drain_margin_seconds = 2;   // part of the drain deadline kept for hand-back + flush
  // Called on the loop's thread after a lease poll that found no work and between retries of
  // a failing queue/buffer call, so at least once per poll_seconds plus call_timeout_seconds
  // while no batch runs. The leader of a multi-rank rollout instance keeps its other ranks in
  // step there (rollout/instance.h); it may request the drain. Empty: nothing.
  std::function<void()> on_idle;
  void validate() const;
};

// What `process` may ask the loop while it runs a batch.
class WorkContext {
 public:
  WorkContext(const DrainController& drain, double margin) : drain_(drain), margin_(margin) {}
  // True when a drain is under way and its deadline (less the margin) is reached: abandon
  // the batch and return nullopt for the unfinished tasks so they are handed back.
  bool should_abort() const {
    return drain_.state() != DrainState::kRunning && !drain_.fits(margin_);
  }
  bool draining() const { return drain_.state() != DrainState::kRunning; }

 private:
  const DrainController& drain_;
  double margin_;
};

// Processes one leased batch: returns one entry per lease, in the leases' order; nullopt
// hands that task back. A record's empty task_id, worker_id, zero cursor and timestamps are
// filled from its lease; task_id and attempt must match it.
using ProcessBatchFn = std::function<std::vector<std::optional<ExperienceRecord>>(
    const std::vector<Lease>& leases, const WorkContext& ctx)>;

struct WorkerLoopResult {
  int64_t completed = 0;     // records put and tasks acked
  int64_t handed_back = 0;   // nacked (drain, or process returned nullopt)
  int64_t lost_leases = 0;   // renew/ack found the lease taken over (record still put)
  int64_t errors = 0;        // queue/buffer calls that failed and were retried
  double busy_seconds = 0;   // inside process()
  double idle_seconds = 0;   // waiting for tasks
  DrainState final_state = DrainState::kRunning;
  std::string drain_reason;
  int exit_code = 0;
};

WorkerLoopResult run_worker_loop(const WorkerLoopConfig& config, TaskQueue& queue,
                                 ExperienceBuffer& buffer, DrainController& drain,
                                 const ProcessBatchFn& process, Accounting* accounting = nullptr);

}  // namespace moerl::runtime
