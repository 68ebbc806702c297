// The rollout worker skeleton: lease -> process (leases renewed meanwhile) -> put -> ack,
// and the drain path (finish what fits, hand back the rest).
#include "runtime/worker_loop.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "runtime/weight_registry.h"

namespace moerl::runtime {
namespace {

bool retryable(const Error& e) {
  return e.code() == ErrorCode::kUnavailable || e.code() == ErrorCode::kTimeout ||
         e.code() == ErrorCode::kIo;
}

// Renews every held lease each period on its own thread, so a long generation never loses
// its lease. Leases found taken over are remembered.
class Renewer {
 public:
  Renewer(TaskQueue& queue, double period, double call_timeout)
      : queue_(queue), period_(period), call_timeout_(call_timeout), thread_([this] { run(); }) {}
  ~Renewer() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void hold(const std::vector<Lease>& leases) {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = leases;
  }
  void release(const std::string& lease_id) {
    std::lock_guard<std::mutex> lock(mu_);
    held_.erase(std::remove_if(held_.begin(), held_.end(),
                               [&](const Lease& l) { return l.lease_id == lease_id; }),
                held_.end());
  }
  bool lost(const std::string& lease_id) {
    std::lock_guard<std::mutex> lock(mu_);
    return lost_.count(lease_id) > 0;
  }
  int64_t errors() const { return errors_.load(); }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::duration<double>(period_), [&] { return stop_; });
      if (stop_) break;
      std::vector<Lease> copy = held_;
      lock.unlock();
      for (const Lease& l : copy) {
        try {
          if (!queue_.renew(l, Deadline::after_seconds(std::min(call_timeout_, period_)))) {
            std::lock_guard<std::mutex> g(mu_);
            lost_.insert(l.lease_id);
          }
        } catch (const Error& e) {
          ++errors_;
          MOERL_LOG(WARN) << "lease renewal of task " << l.task.task_id << " failed: " << e.what();
        }
      }
      lock.lock();
    }
  }

  TaskQueue& queue_;
  const double period_;
  const double call_timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                  // guarded by mu_
  std::vector<Lease> held_;            // guarded by mu_
  std::set<std::string> lost_;         // guarded by mu_
  std::atomic<int64_t> errors_{0};
  std::thread thread_;                 // last: starts after the members above exist
};

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
                                 const ProcessFn& process, Accounting* accounting) {
  config.validate();
  WorkerLoopResult res;
  const double margin = config.drain_margin_seconds;
  auto call_deadline = [&] { return Deadline::after_seconds(config.call_timeout_seconds); };
  // Retries a queue/buffer call through outages; gives up only when a drain has run out of
  // time (then the lease simply expires and another worker redoes the task).
  auto with_retry = [&](const char* what, const std::function<void()>& fn) {
    for (double backoff = 0.05;; backoff = std::min(backoff * 2, 1.0)) {
      try {
        fn();
        return true;
      } catch (const Error& e) {
        if (!retryable(e)) throw;
        ++res.errors;
        MOERL_LOG(WARN) << config.worker_id << ": " << what << " failed, retrying: " << e.what();
        if (drain.state() != DrainState::kRunning && drain.remaining_seconds() <= 0) return false;
        std::this_thread::sleep_for(std::chrono::duration<double>(backoff));
      }
    }
  };
  double estimate = 0;  // running estimate of one task's processing time
  {
    Renewer renewer(queue, config.renew_seconds > 0 ? config.renew_seconds : config.lease_seconds / 3,
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
      renewer.hold(leases);
      size_t i = 0;
      try {
        for (; i < leases.size(); ++i) {
          const Lease& l = leases[i];
          // Draining: start a task only if it is expected to finish before the deadline.
          if (drain.state() != DrainState::kRunning && !drain.fits(estimate + margin)) break;
          double s = now_seconds();
          std::optional<ExperienceRecord> rec = process(l.task, WorkContext(l, drain, margin));
          double took = now_seconds() - s;
          res.busy_seconds += took;
          estimate = estimate == 0 ? took : 0.7 * estimate + 0.3 * took;
          if (!rec) {
            with_retry("nack", [&] { queue.nack(l, call_deadline()); });
            renewer.release(l.lease_id);
            ++res.handed_back;
            continue;
          }
          if (rec->task_id.empty()) rec->task_id = l.task.task_id;
          if (rec->task_id != l.task.task_id || rec->attempt != l.task.attempt) {
            throw Error("worker " + config.worker_id + ": process() returned a record for '" +
                            rec->task_id + "#" + std::to_string(rec->attempt) +
                            "' while working on '" + l.task.task_id + "#" +
                            std::to_string(l.task.attempt) + "'",
                        "copy task_id and attempt from the task unit into the record",
                        ErrorCode::kInternal);
          }
          if (rec->worker_id.empty()) rec->worker_id = config.worker_id;
          if (rec->cursor == 0) rec->cursor = l.task.cursor;
          if (rec->leased_unix_ms == 0) rec->leased_unix_ms = leased_ms;
          if (rec->finished_unix_ms == 0) rec->finished_unix_ms = unix_ms_now();
          // Put first, then ack: a crash in between re-delivers the task and the trainer
          // drops the duplicate; the reverse order could lose it.
          if (!with_retry("put experience", [&] { buffer.put(*rec, call_deadline()); })) break;
          bool acked = false;
          with_retry("ack", [&] { acked = queue.ack(l, call_deadline()); });
          renewer.release(l.lease_id);
          if (!acked || renewer.lost(l.lease_id)) ++res.lost_leases;
          ++res.completed;
          if (accounting) accounting->add(Counter::kSamplesGenerated, static_cast<int64_t>(rec->samples.size()));
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
