// LeaseRenewer's thread and CallRetry's backoff.
#include "runtime/lease_renewer.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "base/log.h"

namespace moerl::runtime {

LeaseRenewer::LeaseRenewer(TaskQueue& queue, double period, double call_timeout)
    : queue_(queue), period_(period), call_timeout_(call_timeout), thread_([this] { run(); }) {}

LeaseRenewer::~LeaseRenewer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void LeaseRenewer::hold(const std::vector<Lease>& leases) {
  std::lock_guard<std::mutex> lock(mu_);
  held_ = leases;
}

void LeaseRenewer::add(const std::vector<Lease>& leases) {
  std::lock_guard<std::mutex> lock(mu_);
  held_.insert(held_.end(), leases.begin(), leases.end());
}

void LeaseRenewer::release(const std::string& lease_id) {
  std::lock_guard<std::mutex> lock(mu_);
  held_.erase(std::remove_if(held_.begin(), held_.end(), [&](const Lease& l) { return l.lease_id == lease_id; }),
              held_.end());
}

bool LeaseRenewer::lost(const std::string& lease_id) {
  std::lock_guard<std::mutex> lock(mu_);
  return lost_.count(lease_id) > 0;
}

void LeaseRenewer::run() {
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

bool CallRetry::operator()(const char* what, const std::function<void()>& fn) const {
  for (double backoff = 0.05;; backoff = std::min(backoff * 2, 1.0)) {
    try {
      fn();
      return true;
    } catch (const Error& e) {
      const bool transient =
          e.code() == ErrorCode::kUnavailable || e.code() == ErrorCode::kTimeout || e.code() == ErrorCode::kIo;
      if (!transient) throw;
      ++*errors_;
      MOERL_LOG(WARN) << worker_id_ << ": " << what << " failed, retrying: " << e.what();
      if (drain_.state() != DrainState::kRunning && drain_.remaining_seconds() <= 0) return false;
      std::this_thread::sleep_for(std::chrono::duration<double>(backoff));
      if (on_idle_) on_idle_();
    }
  }
}

}  // namespace moerl::runtime
