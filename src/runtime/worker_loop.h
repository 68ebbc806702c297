// run_worker_loop: the model-agnostic skeleton of a rollout worker. It leases task units,
// renews the leases on a background thread while `process` runs, puts each record into the
// experience buffer and then acks the task; on a drain (SIGTERM, Spot notice) it stops
// leasing, finishes what fits before the drain deadline, nacks the rest so another worker
// takes them at once, and returns exit code 0. The generation engine lives in `process`.
//
//   WorkerLoopConfig cfg{.worker_id = "pod-3", .lease_seconds = 30};
//   WorkerLoopResult r = run_worker_loop(cfg, queue, buffer, drain,
//       [&](const TaskUnit& t, const WorkContext& ctx) -> std::optional<ExperienceRecord> {
//         while (decoding) { if (ctx.should_abort()) return std::nullopt; ... }
//         return record;   // nullopt = hand the task back
//       });
//   return r.exit_code;
// Thread-safety: run it on one thread per worker; queue/buffer may be shared (they are
// thread-safe). Queue/buffer errors (Redis down past call_timeout_seconds) are logged and
// retried until the drain deadline; `process` exceptions propagate after the held leases are
// handed back.
#pragma once

#include <functional>
#include <optional>
#include <string>

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
  void validate() const;
};

class WorkContext {
 public:
  WorkContext(const Lease& lease, const DrainController& drain, double margin)
      : lease_(lease), drain_(drain), margin_(margin) {}
  const Lease& lease() const { return lease_; }
  // True when a drain is under way and its deadline (less the margin) is reached: abandon
  // the task and return nullopt so it is handed back.
  bool should_abort() const {
    return drain_.state() != DrainState::kRunning && !drain_.fits(margin_);
  }
  bool draining() const { return drain_.state() != DrainState::kRunning; }

 private:
  const Lease& lease_;
  const DrainController& drain_;
  double margin_;
};

using ProcessFn = std::function<std::optional<ExperienceRecord>(const TaskUnit&, const WorkContext&)>;

struct WorkerLoopResult {
  int64_t completed = 0;     // records put and tasks acked
  int64_t handed_back = 0;   // nacked (drain or process returned nullopt)
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
                                 const ProcessFn& process, Accounting* accounting = nullptr);

}  // namespace moerl::runtime
