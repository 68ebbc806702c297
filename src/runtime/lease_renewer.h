// The parts of a rollout worker's lease handling that the batch loop (worker_loop.h) and the
// streaming one (lease_stream.h) share: a background renewer of held leases, and retries of
// queue/buffer calls through outages.
//
//   LeaseRenewer renewer(queue, /*period=*/10, /*call_timeout=*/30);
//   renewer.hold(leases);  ... renewer.release(l.lease_id);  renewer.lost(l.lease_id)
//   CallRetry retry(worker_id, drain, on_idle, &errors);
//   if (!retry("put experience", [&] { buffer.put(rec, d); })) ...  // false: the drain ran out
// Thread-safety: LeaseRenewer is; a CallRetry belongs to one thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "runtime/drain.h"
#include "runtime/task_queue.h"

namespace moerl::runtime {

// Renews every held lease each period on its own thread, so a long generation never loses
// its lease. Leases found taken over are remembered.
class LeaseRenewer {
 public:
  LeaseRenewer(TaskQueue& queue, double period, double call_timeout);
  ~LeaseRenewer();
  LeaseRenewer(const LeaseRenewer&) = delete;
  LeaseRenewer& operator=(const LeaseRenewer&) = delete;
  void hold(const std::vector<Lease>& leases);  // replaces what is held
  void add(const std::vector<Lease>& leases);   // holds these too
  void release(const std::string& lease_id);
  bool lost(const std::string& lease_id);
  int64_t errors() const { return errors_.load(); }

 private:
  void run();

  TaskQueue& queue_;
  const double period_;
  const double call_timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;           // guarded by mu_
  std::vector<Lease> held_;     // guarded by mu_
  std::set<std::string> lost_;  // guarded by mu_
  std::atomic<int64_t> errors_{0};
  std::thread thread_;  // last: starts after the members above exist
};

// Retries a queue/buffer call whose error is transient (unavailable, timeout, I/O) with
// backoff, counting each failure in `errors` and calling `on_idle` between tries; other errors
// propagate. Gives up (false) only when a drain is under way and its deadline has passed:
// then the lease simply expires and another worker redoes the task.
class CallRetry {
 public:
  CallRetry(std::string worker_id, const DrainController& drain, std::function<void()> on_idle, int64_t* errors)
      : worker_id_(std::move(worker_id)), drain_(drain), on_idle_(std::move(on_idle)), errors_(errors) {}
  bool operator()(const char* what, const std::function<void()>& fn) const;

 private:
  std::string worker_id_;
  const DrainController& drain_;
  std::function<void()> on_idle_;
  int64_t* errors_;
};

}  // namespace moerl::runtime
