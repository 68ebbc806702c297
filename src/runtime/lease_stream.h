// The streaming counterpart of run_worker_loop (worker_loop.h), for a worker that keeps its
// decode rows full: leases are taken a few at a time while generation runs, each record is
// put and its task acked as soon as that record is done, and whatever is still held when
// generation stops early is handed back. Puts and acks run on a background thread, in order,
// so the generating thread never waits on the buffer; held leases are renewed on another.
//
//   LeaseStream s(loop_config, queue, buffer, drain, &accounting);
//   for (Lease& l : s.take(4, /*wait_seconds=*/0.01)) start(l.task);   // none while draining
//   s.complete(record);          // task_id + attempt name the held lease
//   s.hand_back_all();           // generation abandoned (a drain deadline): nack the rest
//   WorkerLoopResult r = s.finish();   // after the pending puts; drain marked drained
// Thread-safety: take/complete/hand_back_all/finish from one thread. Errors: complete() of a
// record no held lease matches (kInternal); a buffer or queue error that is not transient,
// rethrown by the next call after the background thread met it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/lease_renewer.h"
#include "runtime/worker_loop.h"

namespace moerl::runtime {

class LeaseStream {
 public:
  LeaseStream(WorkerLoopConfig config, TaskQueue& queue, ExperienceBuffer& buffer, DrainController& drain,
              Accounting* accounting = nullptr);
  ~LeaseStream();  // hands back what is still held, after the pending puts
  LeaseStream(const LeaseStream&) = delete;
  LeaseStream& operator=(const LeaseStream&) = delete;

  // Up to n new leases, waiting at most `wait_seconds` for work (the time counts as idle while
  // nothing is held). None while draining, nor past max_tasks taken.
  std::vector<Lease> take(int n, double wait_seconds);
  // Puts the record of a held lease and then acks the lease (put first: a crash between the two
  // re-delivers the task and the trainer drops the duplicate; the reverse could lose it).
  void complete(ExperienceRecord record);
  void hand_back_all();
  int64_t held() const { return static_cast<int64_t>(held_.size()); }
  bool exhausted() const { return config_.max_tasks > 0 && taken_ >= config_.max_tasks; }
  // Waits for the pending puts and returns the loop's result; marks a drain under way drained.
  WorkerLoopResult finish();

 private:
  void settle_loop();
  void rethrow();

  const WorkerLoopConfig config_;
  TaskQueue& queue_;
  ExperienceBuffer& buffer_;
  DrainController& drain_;
  Accounting* accounting_;
  WorkerLoopResult res_;  // counters guarded by mu_ once the settler runs
  int64_t taken_ = 0;
  double started_ = 0;
  std::map<std::string, Lease> held_;  // "task_id#attempt" -> lease, not yet completed
  std::unique_ptr<LeaseRenewer> renewer_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<Lease, ExperienceRecord>> pending_;  // guarded by mu_
  bool stop_ = false, busy_ = false;                        // guarded by mu_
  std::exception_ptr error_;                                // guarded by mu_
  std::thread settler_;  // last: starts after the members above exist
};

}  // namespace moerl::runtime
