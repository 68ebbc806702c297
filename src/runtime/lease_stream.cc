// LeaseStream: leases taken as rows free up, records put and acked on a background thread.
#include "runtime/lease_stream.h"

#include <utility>

#include "base/error.h"
#include "base/log.h"
#include "runtime/weight_registry.h"

namespace moerl::runtime {
namespace {

std::string key_of(const std::string& task_id, uint32_t attempt) { return task_id + "#" + std::to_string(attempt); }

}  // namespace

LeaseStream::LeaseStream(WorkerLoopConfig config, TaskQueue& queue, ExperienceBuffer& buffer, DrainController& drain,
                         Accounting* accounting)
    : config_(std::move(config)), queue_(queue), buffer_(buffer), drain_(drain), accounting_(accounting) {
  config_.validate();
  started_ = now_seconds();
  renewer_ = std::make_unique<LeaseRenewer>(
      queue_, config_.renew_seconds > 0 ? config_.renew_seconds : config_.lease_seconds / 3,
      config_.call_timeout_seconds);
  settler_ = std::thread([this] { settle_loop(); });
}

LeaseStream::~LeaseStream() {
  try {
    finish();
  } catch (const std::exception& e) {
    MOERL_LOG(WARN) << config_.worker_id << ": closing the lease stream: " << e.what();
  }
}

void LeaseStream::rethrow() {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

std::vector<Lease> LeaseStream::take(int n, double wait_seconds) {
  rethrow();
  std::vector<Lease> out;
  if (n < 1 || drain_.state() != DrainState::kRunning) return out;
  if (config_.max_tasks > 0) n = static_cast<int>(std::min<int64_t>(n, config_.max_tasks - taken_));
  if (n < 1) return out;
  const double t0 = now_seconds();
  int64_t errors = 0;
  const CallRetry retry(config_.worker_id, drain_, config_.on_idle, &errors);
  retry("lease", [&] {
    out = queue_.lease(config_.worker_id, n, config_.lease_seconds, Deadline::after_seconds(wait_seconds));
  });
  {
    std::lock_guard<std::mutex> lock(mu_);
    res_.errors += errors;
    if (held_.empty()) res_.idle_seconds += now_seconds() - t0;
  }
  for (const Lease& l : out) held_[key_of(l.task.task_id, l.task.attempt)] = l;
  taken_ += static_cast<int64_t>(out.size());
  renewer_->add(out);
  return out;
}

void LeaseStream::complete(ExperienceRecord record) {
  rethrow();
  auto it = held_.find(key_of(record.task_id, record.attempt));
  if (it == held_.end()) {
    throw Error("worker " + config_.worker_id + ": a record for '" + record.task_id + "#" +
                    std::to_string(record.attempt) + "', which no lease it holds is for",
                "copy task_id and attempt from the leased task unit into its record", ErrorCode::kInternal);
  }
  const Lease lease = it->second;
  held_.erase(it);
  if (record.worker_id.empty()) record.worker_id = config_.worker_id;
  if (record.cursor == 0) record.cursor = lease.task.cursor;
  if (record.finished_unix_ms == 0) record.finished_unix_ms = unix_ms_now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.emplace_back(lease, std::move(record));
  }
  cv_.notify_all();
}

void LeaseStream::settle_loop() {
  int64_t errors = 0;
  const CallRetry retry(config_.worker_id, drain_, nullptr, &errors);
  auto deadline = [&] { return Deadline::after_seconds(config_.call_timeout_seconds); };
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
    if (pending_.empty()) return;
    auto [lease, rec] = std::move(pending_.front());
    pending_.pop_front();
    busy_ = true;
    lock.unlock();
    bool put = false, acked = false;
    std::exception_ptr failed;
    try {
      put = retry("put experience", [&] { buffer_.put(rec, deadline()); });
      if (put) retry("ack", [&] { acked = queue_.ack(lease, deadline()); });
    } catch (...) {
      failed = std::current_exception();  // rethrown by the next call on the worker's thread
    }
    if (!failed) renewer_->release(lease.lease_id);
    lock.lock();
    busy_ = false;
    res_.errors += std::exchange(errors, 0);
    if (failed) {
      error_ = failed;
    } else if (put) {
      if (!acked || renewer_->lost(lease.lease_id)) ++res_.lost_leases;
      ++res_.completed;
      if (accounting_) accounting_->add(Counter::kSamplesGenerated, static_cast<int64_t>(rec.samples.size()));
    }
    cv_.notify_all();
  }
}

void LeaseStream::hand_back_all() {
  int64_t errors = 0, handed_back = 0;
  const CallRetry retry(config_.worker_id, drain_, nullptr, &errors);
  for (const auto& [key, l] : held_) {
    bool ok = false;
    retry("nack", [&] { ok = queue_.nack(l, Deadline::after_seconds(config_.call_timeout_seconds)); });
    renewer_->release(l.lease_id);
    if (ok) {
      ++handed_back;
      if (accounting_) accounting_->add(Counter::kTasksRequeued);
    }
  }
  held_.clear();
  std::lock_guard<std::mutex> lock(mu_);
  res_.errors += errors;
  res_.handed_back += handed_back;
}

WorkerLoopResult LeaseStream::finish() {
  if (settler_.joinable()) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return pending_.empty() && !busy_; });
      stop_ = true;
    }
    cv_.notify_all();
    settler_.join();
    hand_back_all();
    res_.errors += renewer_->errors();
    renewer_.reset();
    if (drain_.state() == DrainState::kDraining) drain_.mark_drained();
    res_.final_state = drain_.state();
    res_.drain_reason = drain_.reason();
    res_.busy_seconds = now_seconds() - started_ - res_.idle_seconds;
    if (accounting_) accounting_->add_role_time(Role::kRollout, res_.busy_seconds, res_.idle_seconds);
    MOERL_LOG(INFO) << config_.worker_id << ": streaming worker done (" << drain_state_name(res_.final_state)
                    << (res_.drain_reason.empty() ? "" : ", " + res_.drain_reason) << "): " << res_.completed
                    << " completed, " << res_.handed_back << " handed back, " << res_.lost_leases << " lost leases, "
                    << res_.errors << " retried errors";
  }
  rethrow();
  return res_;
}

}  // namespace moerl::runtime
