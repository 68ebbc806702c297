// The rollout worker skeleton: lease a batch -> process it (leases renewed meanwhile) ->
// put -> ack per record, and the drain path (start a batch only if it fits, hand back the rest).
#include "runtime/worker_loop.h"

#include <algorithm>

#include "base/error.h"
#include "base/log.h"
#include "runtime/lease_renewer.h"
#include "runtime/weight_registry.h"

namespace moerl::runtime {
namespace {

// Checks that `process` answered the batch: one entry per lease, each record for its lease's
// task and attempt (an empty task_id is filled in). Throws kInternal otherwise.
void check_batch(const std::string& worker_id, const std::vector<Lease>& leases,
                 std::vector<std::optional<ExperienceRecord>>& recs) {
  if (recs.size() != leases.size()) {
    throw Error("worker " + worker_id + ": process() returned " + std::to_string(recs.size()) +
                    " entries for a batch of " + std::to_string(leases.size()) + " leases",
                "return one entry per lease, in order (nullopt hands that task back)",
                ErrorCode::kInternal);
  }
  for (size_t i = 0; i < leases.size(); ++i) {
    if (!recs[i]) continue;
    ExperienceRecord& rec = *recs[i];
    const TaskUnit& t = leases[i].task;
    if (rec.task_id.empty()) rec.task_id = t.task_id;
    if (rec.task_id != t.task_id || rec.attempt != t.attempt) {
      throw Error("worker " + worker_id + ": process() returned a record for '" + rec.task_id + "#" +
                      std::to_string(rec.attempt) + "' at position " + std::to_string(i) +
                      " of the batch, whose lease is for '" + t.task_id + "#" +
                      std::to_string(t.attempt) + "'",
                  "copy task_id and attempt from each lease's task unit into its record",
                  ErrorCode::kInternal);
    }
  }
}

}  // namespace

void WorkerLoopConfig::validate() const {
  if (worker_id.empty() || tasks_per_lease < 1 || !(lease_seconds > 0) || renew_seconds < 0 ||
      (renew_seconds > 0 && renew_seconds >= lease_seconds) || !(poll_seconds > 0) ||
      !(call_timeout_seconds > 0) || max_tasks < 0 || drain_margin_seconds < 0) {
    throw Error("worker loop: worker_id='" + worker_id + "' tasks_per_lease=" +
                    std::to_string(tasks_per_lease) + " lease_seconds=" +
                    std::to_string(lease_seconds) + " renew_seconds=" + std::to_string(renew_seconds) +
                    " poll_seconds=" + std::to_string(poll_seconds) + " call_timeout_seconds=" +
                    std::to_string(call_timeout_seconds) + " max_tasks=" + std::to_string(max_tasks) +
                    " drain_margin_seconds=" + std::to_string(drain_margin_seconds) +
                    " is not a valid combination",
                "need a worker id, tasks_per_lease >= 1, lease_seconds > 0, 0 <= renew_seconds < "
                "lease_seconds, positive poll/call timeouts");
  }
}

WorkerLoopResult run_worker_loop(const WorkerLoopConfig& config, TaskQueue& queue,
                                 ExperienceBuffer& buffer, DrainController& drain,
                                 const ProcessBatchFn& process, Accounting* accounting) {
  config.validate();
  WorkerLoopResult res;
  const double margin = config.drain_margin_seconds;
  auto call_deadline = [&] { return Deadline::after_seconds(config.call_timeout_seconds); };
  const CallRetry with_retry(config.worker_id, drain, config.on_idle, &res.errors);
  double estimate = 0;  // running estimate of one batch's processing time
  {
    LeaseRenewer renewer(queue, config.renew_seconds > 0 ? config.renew_seconds : config.lease_seconds / 3,
                    config.call_timeout_seconds);
    while (drain.state() == DrainState::kRunning &&
           (config.max_tasks == 0 || res.completed < config.max_tasks)) {
      int want = config.tasks_per_lease;
      if (config.max_tasks > 0) {
        want = static_cast<int>(std::min<int64_t>(want, config.max_tasks - res.completed));
      }
      double t0 = now_seconds();
      std::vector<Lease> leases;
      with_retry("lease", [&] {
        leases = queue.lease(config.worker_id, want, config.lease_seconds,
                             Deadline::after_seconds(config.poll_seconds));
      });
      int64_t leased_ms = unix_ms_now();
      res.idle_seconds += now_seconds() - t0;
      if (leases.empty()) {
        if (config.on_idle) config.on_idle();
        continue;
      }
      renewer.hold(leases);
      size_t i = 0;  // NOTE: leases[0, i) are settled: put and acked, or handed back
      try {
        // Draining (it began during lease()): start the batch only if it is expected to
        // finish before the deadline; otherwise all of it is handed back below.
        if (drain.state() == DrainState::kRunning || drain.fits(estimate + margin)) {
          double s = now_seconds();
          std::vector<std::optional<ExperienceRecord>> recs = process(leases, WorkContext(drain, margin));
          double took = now_seconds() - s;
          int64_t finished_ms = unix_ms_now();
          res.busy_seconds += took;
          estimate = estimate == 0 ? took : 0.7 * estimate + 0.3 * took;
          check_batch(config.worker_id, leases, recs);
          for (; i < leases.size(); ++i) {
            const Lease& l = leases[i];
            if (!recs[i]) {
              with_retry("nack", [&] { queue.nack(l, call_deadline()); });
              renewer.release(l.lease_id);
              ++res.handed_back;
              continue;
            }
            ExperienceRecord& rec = *recs[i];
            if (rec.worker_id.empty()) rec.worker_id = config.worker_id;
            if (rec.cursor == 0) rec.cursor = l.task.cursor;
            if (rec.leased_unix_ms == 0) rec.leased_unix_ms = leased_ms;
            if (rec.finished_unix_ms == 0) rec.finished_unix_ms = finished_ms;
            // Put first, then ack: a crash in between re-delivers the task and the trainer
            // drops the duplicate; the reverse order could lose it.
            if (!with_retry("put experience", [&] { buffer.put(rec, call_deadline()); })) break;
            bool acked = false;
            with_retry("ack", [&] { acked = queue.ack(l, call_deadline()); });
            renewer.release(l.lease_id);
            if (!acked || renewer.lost(l.lease_id)) ++res.lost_leases;
            ++res.completed;
            if (accounting) accounting->add(Counter::kSamplesGenerated, static_cast<int64_t>(rec.samples.size()));
          }
        }
      } catch (...) {
        for (size_t k = i; k < leases.size(); ++k) {
          try {
            queue.nack(leases[k], call_deadline());
          } catch (const Error&) {
          }
        }
        throw;
      }
      // Leases not started (drain, or the deadline ran out): hand them back at once.
      for (; i < leases.size(); ++i) {
        bool ok = false;
        with_retry("nack", [&] { ok = queue.nack(leases[i], call_deadline()); });
        renewer.release(leases[i].lease_id);
        if (ok) {
          ++res.handed_back;
          if (accounting) accounting->add(Counter::kTasksRequeued);
        }
      }
    }
    res.errors += renewer.errors();
  }
  // NOTE: put() returns only once the record is stored (Redis: AOF-fsynced), so there is no
  // separate flush; reaching here means all completed experience is in the buffer.
  if (drain.state() == DrainState::kDraining) drain.mark_drained();
  res.final_state = drain.state();
  res.drain_reason = drain.reason();
  res.exit_code = 0;
  if (accounting) accounting->add_role_time(Role::kRollout, res.busy_seconds, res.idle_seconds);
  MOERL_LOG(INFO) << config.worker_id << ": worker loop done (" << drain_state_name(res.final_state)
                  << (res.drain_reason.empty() ? "" : ", " + res.drain_reason) << "): "
                  << res.completed << " completed, " << res.handed_back << " handed back, "
                  << res.lost_leases << " lost leases, " << res.errors << " retried errors";
  return res;
}

}  // namespace moerl::runtime
