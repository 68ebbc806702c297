// In-process TaskQueue / ExperienceBuffer. Lease ids are "<seq>:<delivery>", so a lease
// from an earlier delivery of the same task never matches the current holder.
#include "runtime/in_process_queue.h"

#include <algorithm>

#include "base/error.h"
#include "base/log.h"

namespace moerl::runtime {
namespace {

using Clock = std::chrono::steady_clock;

Clock::duration seconds_to_duration(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

bool parse_lease_id(const std::string& id, uint64_t* seq, uint32_t* delivery) {
  size_t colon = id.find(':');
  if (colon == std::string::npos) return false;
  try {
    *seq = std::stoull(id.substr(0, colon));
    *delivery = static_cast<uint32_t>(std::stoul(id.substr(colon + 1)));
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

}  // namespace

bool wait_for_condition(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                        const Deadline& deadline, const std::function<bool()>& ready,
                        Clock::time_point wake_at) {
  while (!ready()) {
    Clock::time_point now = Clock::now();
    if (now >= deadline.at() || now >= wake_at) return ready();
    // NOTE: clamp so Deadline::never() (time_point::max) cannot overflow the wait.
    Clock::time_point until = std::min({deadline.at(), wake_at, now + std::chrono::hours(1)});
    cv.wait_until(lock, until);
  }
  return true;
}

InProcessTaskQueue::InProcessTaskQueue(QueueOptions options) : options_(options) {
  if (options_.max_deliveries < 1) {
    throw Error("queue: max_deliveries=0, expected >= 1",
                "set runtime.max_deliveries to the deliveries allowed before dead-lettering (e.g. 5)");
  }
}

void InProcessTaskQueue::enqueue_locked(const TaskUnit& task) {
  uint64_t seq = next_seq_++;
  entries_[seq].task = task;
  ready_.push_back(seq);
  ++stats_.enqueued;
}

void InProcessTaskQueue::enqueue(const TaskUnit& task, Deadline deadline) {
  validate(task);
  {
    std::lock_guard<std::mutex> lock(mu_);
    enqueue_locked(task);
  }
  cv_.notify_all();
}

bool InProcessTaskQueue::enqueue_from(const TaskUnit& task, uint64_t next_cursor,
                                      Deadline deadline) {
  validate(task);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (producer_cursor_ >= next_cursor) return false;
    producer_cursor_ = next_cursor;
    enqueue_locked(task);
  }
  cv_.notify_all();
  return true;
}

uint64_t InProcessTaskQueue::producer_cursor(Deadline deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  return producer_cursor_;
}

void InProcessTaskQueue::reclaim_expired_locked(Clock::time_point now) {
  // Expired leases go to the front in seq order: they have waited longest.
  std::vector<uint64_t> expired;
  for (auto& [seq, e] : entries_) {
    if (e.leased && e.expires <= now) {
      e.leased = false;
      e.holder.clear();
      expired.push_back(seq);
    }
  }
  for (auto it = expired.rbegin(); it != expired.rend(); ++it) ready_.push_front(*it);
  stats_.requeued += static_cast<int64_t>(expired.size());
}

std::vector<Lease> InProcessTaskQueue::lease(const std::string& worker, int n,
                                             double lease_seconds, Deadline deadline) {
  if (n < 1 || lease_seconds <= 0 || worker.empty()) {
    throw Error("queue lease: worker='" + worker + "' n=" + std::to_string(n) +
                    " lease_seconds=" + std::to_string(lease_seconds) +
                    ": need a worker name, n >= 1 and lease_seconds > 0",
                "pass the worker id, the tasks wanted and runtime.lease_seconds");
  }
  std::vector<Lease> out;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    Clock::time_point now = Clock::now();
    reclaim_expired_locked(now);
    while (!ready_.empty() && static_cast<int>(out.size()) < n) {
      uint64_t seq = ready_.front();
      ready_.pop_front();
      Entry& e = entries_.at(seq);
      if (e.deliveries >= options_.max_deliveries) {
        dead_.push_back(std::move(e.task));
        entries_.erase(seq);
        ++stats_.dead_lettered;
        continue;
      }
      ++e.deliveries;
      e.leased = true;
      e.holder = worker;
      e.lease_seconds = lease_seconds;
      e.expires = now + seconds_to_duration(lease_seconds);
      out.push_back(Lease{std::to_string(seq) + ":" + std::to_string(e.deliveries), worker,
                          e.deliveries, lease_seconds, e.task});
    }
    if (!out.empty() || now >= deadline.at()) return out;
    // Wake for a new task or for the earliest lease expiry, whichever comes first.
    Clock::time_point next_expiry = Clock::time_point::max();
    for (const auto& [seq, e] : entries_) {
      if (e.leased) next_expiry = std::min(next_expiry, e.expires);
    }
    wait_for_condition(cv_, lock, deadline, [&] { return !ready_.empty(); }, next_expiry);
  }
}

InProcessTaskQueue::Entry* InProcessTaskQueue::held(const Lease& lease, uint64_t* seq) {
  uint32_t delivery = 0;
  if (!parse_lease_id(lease.lease_id, seq, &delivery)) {
    throw Error("queue: lease id '" + lease.lease_id + "' is not of the form <seq>:<delivery>",
                "pass a Lease returned by this queue's lease()");
  }
  auto it = entries_.find(*seq);
  if (it == entries_.end()) return nullptr;
  Entry& e = it->second;
  // NOTE: like Redis, an expired lease stays with its holder until a lease() or depth() call
  // reclaims it; from then on the old holder has lost it.
  if (!e.leased || e.deliveries != delivery || e.holder != lease.worker) return nullptr;
  return &e;
}

bool InProcessTaskQueue::renew(const Lease& lease, Deadline deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t seq = 0;
  Entry* e = held(lease, &seq);
  if (e == nullptr) return false;
  e->expires = Clock::now() + seconds_to_duration(e->lease_seconds);
  return true;
}

bool InProcessTaskQueue::ack(const Lease& lease, Deadline deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t seq = 0;
  if (held(lease, &seq) == nullptr) return false;
  entries_.erase(seq);
  ++stats_.acked;
  return true;
}

bool InProcessTaskQueue::nack(const Lease& lease, Deadline deadline) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t seq = 0;
    Entry* e = held(lease, &seq);
    if (e == nullptr) return false;
    e->leased = false;
    e->holder.clear();
    ready_.push_front(seq);
    ++stats_.requeued;
  }
  cv_.notify_all();
  return true;
}

QueueDepth InProcessTaskQueue::depth(Deadline deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  reclaim_expired_locked(Clock::now());
  QueueDepth d;
  d.ready = static_cast<int64_t>(ready_.size());
  d.leased = static_cast<int64_t>(entries_.size()) - d.ready;
  d.dead = static_cast<int64_t>(dead_.size());
  return d;
}

std::vector<TaskUnit> InProcessTaskQueue::dead_letters(Deadline deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  return dead_;
}

QueueStats InProcessTaskQueue::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void InProcessExperienceBuffer::put(const ExperienceRecord& record, Deadline deadline) {
  validate(record);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready_.push_back(record);
    ++num_put_total_;
    ++stats_.put;
  }
  cv_.notify_all();
}

std::vector<ExperienceRecord> InProcessExperienceBuffer::take(size_t n, Deadline deadline) {
  std::vector<ExperienceRecord> out;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    while (!ungot_.empty() && out.size() < n) {
      out.push_back(std::move(ungot_.front()));
      ungot_.pop_front();
    }
    while (!ready_.empty() && out.size() < n) {
      ExperienceRecord r = std::move(ready_.front());
      ready_.pop_front();
      if (std::string why = check_ ? check_(r) : ""; !why.empty()) {
        quarantine(std::move(r), std::move(why));
        continue;
      }
      if (!seen_.admit(dedupe_key(r.task_id, r.attempt), r.cursor)) {
        ++stats_.duplicates_dropped;
        continue;
      }
      ++stats_.taken;
      out.push_back(std::move(r));
    }
    if (out.size() >= n || deadline.expired()) return out;
    wait_for_condition(cv_, lock, deadline, [&] { return !ready_.empty() || !ungot_.empty(); });
  }
}

void InProcessExperienceBuffer::unget(std::vector<ExperienceRecord> records) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = records.rbegin(); it != records.rend(); ++it) ungot_.push_front(std::move(*it));
  }
  cv_.notify_all();
}

BufferSnapshot InProcessExperienceBuffer::snapshot() {
  std::lock_guard<std::mutex> lock(mu_);
  BufferSnapshot s;
  s.cursor = std::to_string(num_put_total_);
  s.seen = seen_.keys();
  s.settled_below = seen_.settled_below();
  s.ungot.assign(ungot_.begin(), ungot_.end());
  s.pending.assign(ready_.begin(), ready_.end());
  s.duplicates_dropped = stats_.duplicates_dropped;
  s.taken = stats_.taken;
  return s;
}

void InProcessExperienceBuffer::restore(const BufferSnapshot& snapshot, Deadline deadline) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready_.clear();
    ungot_.clear();
    seen_.restore(snapshot.seen, snapshot.settled_below);
    ungot_.assign(snapshot.ungot.begin(), snapshot.ungot.end());
    ready_.assign(snapshot.pending.begin(), snapshot.pending.end());
    num_put_total_ = snapshot.cursor.empty() ? 0 : std::stoull(snapshot.cursor);
    stats_.duplicates_dropped = snapshot.duplicates_dropped;
    stats_.taken = snapshot.taken;
    stats_.available = static_cast<int64_t>(ready_.size() + ungot_.size());
  }
  cv_.notify_all();
}

void InProcessExperienceBuffer::quarantine(ExperienceRecord r, std::string why) {
  QuarantinedRecord q{.entry_id = "put-" + std::to_string(num_put_total_ - ready_.size()),
                      .task_id = r.task_id,
                      .attempt = r.attempt,
                      .decoded = true,
                      .cursor = r.cursor,
                      .key_taken = seen_.taken(dedupe_key(r.task_id, r.attempt), r.cursor),
                      .reason = std::move(why)};
  MOERL_LOG(ERROR) << "experience record " << dedupe_key(q.task_id, q.attempt) << " (" << q.entry_id
                   << ") quarantined: " << q.reason;
  ++stats_.quarantined;
  if (on_quarantine_) {
    if (std::optional<uint64_t> at = on_quarantine_(q)) seen_.reserve(dedupe_key(q.task_id, q.attempt), *at);
  }
  quarantined_.push_back(std::move(r));
}

void InProcessExperienceBuffer::settle_below(uint64_t cursor) {
  std::lock_guard<std::mutex> lock(mu_);
  seen_.settle_below(cursor);
}

void InProcessExperienceBuffer::set_quarantine(RecordCheck check, QuarantineHandler on_quarantine) {
  std::lock_guard<std::mutex> lock(mu_);
  check_ = std::move(check);
  on_quarantine_ = std::move(on_quarantine);
}

std::vector<ExperienceRecord> InProcessExperienceBuffer::quarantined() const {
  std::lock_guard<std::mutex> lock(mu_);
  return quarantined_;
}

BufferStats InProcessExperienceBuffer::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  BufferStats s = stats_;
  s.available = static_cast<int64_t>(ready_.size() + ungot_.size());
  return s;
}

}  // namespace moerl::runtime
