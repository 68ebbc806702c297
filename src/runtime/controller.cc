// AsyncController: queue top-up, stale handling and trainer idle accounting.
#include "runtime/controller.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "base/error.h"
#include "base/log.h"

namespace moerl::runtime {

namespace {
// Standard deviations of the kept count that the queue target covers (dynamic sampling).
constexpr double kFillMargin = 1.5;
}  // namespace

void ControllerConfig::validate() const {
  if (total_tasks < 0 || queue_ahead < 1 || max_queue_factor < 1 || !(call_timeout_seconds > 0)) {
    throw Error("controller: total_tasks=" + std::to_string(total_tasks) + " queue_ahead=" +
                    std::to_string(queue_ahead) + " max_queue_factor=" + std::to_string(max_queue_factor) +
                    " call_timeout_seconds=" + std::to_string(call_timeout_seconds) + " out of range",
                "need total_tasks >= 0 (0 = unlimited), queue_ahead >= 1, max_queue_factor >= 1, a positive "
                "timeout");
  }
}

AsyncController::AsyncController(ControllerConfig config, TaskQueue& queue,
                                 ExperienceBuffer& buffer, TaskFactory factory,
                                 Accounting* accounting)
    : config_(std::move(config)),
      queue_(queue),
      buffer_(buffer),
      factory_(std::move(factory)),
      acc_(accounting ? accounting : &own_acc_),
      cursor_(config_.first_cursor) {
  config_.validate();
}

int64_t AsyncController::queue_target() const {
  if (!config_.drop_no_signal) return config_.queue_ahead;
  // N tasks keep ~Binomial(N, k) records. N = (q + z sqrt(q (1 - k))) / k fills a batch of q
  // with ~93% probability (z = 1.5), so the trainer seldom waits on a short batch.
  const double q = static_cast<double>(config_.queue_ahead);
  const double k = kept_.value();
  const double n = (q + kFillMargin * std::sqrt(q * (1 - k))) / k;
  return static_cast<int64_t>(std::ceil(std::min(n, q * static_cast<double>(config_.max_queue_factor)) - 1e-9));
}

int64_t AsyncController::top_up(Deadline deadline) {
  int64_t queued = queue_.depth(deadline).queued();
  // Records generated but not yet trained are work ahead too: counting them keeps the
  // pipeline one step deep, so records reach the trainer ~1 version old, not 2.
  const int64_t waiting = buffer_.stats().available;
  int64_t n = 0;
  const int64_t target = queue_target();
  while (queued + waiting + n < target &&
         (config_.total_tasks == 0 ||
          static_cast<int64_t>(cursor_ - config_.first_cursor) < config_.total_tasks)) {
    // Idempotent: after a restart, tasks a previous life already enqueued are skipped.
    if (queue_.enqueue_from(factory_(cursor_, 0), cursor_ + 1, deadline)) ++n;
    ++cursor_;
  }
  // NOTE: created is the dataset span handed out, so it survives restarts exactly.
  acc_->set(Counter::kTasksCreated, static_cast<int64_t>(cursor_ - config_.first_cursor));
  acc_->set_queue_depth(queued + n);
  return n;
}

std::vector<ExperienceRecord> AsyncController::next_batch(size_t n, uint64_t current_version,
                                                          Deadline deadline) {
  double entered = now_seconds();
  if (last_return_ > 0) acc_->add_role_time(Role::kTrainer, entered - last_return_, 0);
  std::vector<ExperienceRecord> out;
  while (out.size() < n) {
    top_up(Deadline::after_seconds(config_.call_timeout_seconds));
    // Short takes, so the queue is topped up while the trainer waits.
    Deadline slice = Deadline::after_seconds(std::min(0.5, std::max(0.0, deadline.remaining_seconds())));
    std::vector<ExperienceRecord> got = buffer_.take(n - out.size(), slice);
    acc_->set(Counter::kDuplicatesDropped, buffer_.stats().duplicates_dropped);
    // Every task created and none left in the queue: nothing more can arrive (a filtered or
    // dropped tail leaves the batch short).
    if (got.empty() && exhausted() &&
        queue_.depth(Deadline::after_seconds(config_.call_timeout_seconds)).queued() == 0) {
      break;
    }
    StaleSplit split = config_.stale.apply(std::move(got), current_version, acc_);
    for (ExperienceRecord& r : split.keep) {
      regenerating_.erase(r.task_id);
      if (config_.drop_no_signal) {
        const bool keep = has_signal(r);
        kept_.observe(keep);
        if (!keep) {
          acc_->add(Counter::kGroupsFiltered);
          continue;
        }
      }
      out.push_back(std::move(r));
    }
    if (config_.stale.policy == StalePolicy::kRegenerate) {
      for (const ExperienceRecord& r : split.stale) {
        TaskUnit again = factory_(r.cursor, r.attempt + 1);
        regenerating_[again.task_id] = {r.cursor, again.attempt};
        queue_.enqueue(again, Deadline::after_seconds(config_.call_timeout_seconds));
      }
    }
    if (deadline.expired()) break;
  }
  last_return_ = now_seconds();
  acc_->add_role_time(Role::kTrainer, 0, last_return_ - entered);
  return out;
}

bool AsyncController::exhausted() const {
  return config_.total_tasks > 0 && static_cast<int64_t>(cursor_ - config_.first_cursor) >= config_.total_tasks;
}

bool AsyncController::finished(Deadline deadline) {
  if (config_.total_tasks == 0) return false;
  int64_t created = acc_->get(Counter::kTasksCreated);
  if (created < config_.total_tasks) return false;
  int64_t dead = queue_.depth(deadline).dead;
  return acc_->get(Counter::kTasksCompleted) + dead >= created;
}

BufferSnapshot AsyncController::snapshot() {
  BufferSnapshot s = buffer_.snapshot();
  s.data_cursor = cursor_;
  nlohmann::json regen = nlohmann::json::array();
  for (const auto& [id, at] : regenerating_) regen.push_back({at.first, at.second});
  s.extra = nlohmann::json{{"accounting", acc_->state()}, {"regenerating", regen}}.dump();
  return s;
}

void AsyncController::restore(const BufferSnapshot& snapshot, Deadline deadline) {
  buffer_.restore(snapshot, deadline);
  // Resume after whatever a previous life enqueued (Redis keeps it; in-process it is gone).
  const uint64_t queued_up_to = queue_.producer_cursor(deadline);
  cursor_ = std::max<uint64_t>({snapshot.data_cursor, queued_up_to, config_.first_cursor});
  if (!snapshot.extra.empty()) {
    auto j = nlohmann::json::parse(snapshot.extra, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      throw Error("controller state in the checkpoint is not JSON",
                  "the checkpoint was written by a different moerl build", ErrorCode::kIo);
    }
    // Older snapshots hold the accounting state alone.
    acc_->load_state(j.contains("accounting") ? j["accounting"] : j);
    regenerating_.clear();
    for (const auto& e : j.value("regenerating", nlohmann::json::array())) {
      TaskUnit u = factory_(e.at(0).get<uint64_t>(), e.at(1).get<uint32_t>());
      regenerating_[u.task_id] = {u.cursor, u.attempt};
    }
  }
  // A queue that does not remember the tasks before the checkpoint's cursor (in-process: a
  // new process) lost those still queued or leased: enqueue again each one the snapshot
  // does not show as handed to the trainer or waiting in the buffer.
  if (queued_up_to < snapshot.data_cursor) {
    requeue_lost(snapshot, std::max(queued_up_to, config_.first_cursor), deadline);
  }
  acc_->set(Counter::kTasksCreated, static_cast<int64_t>(cursor_ - config_.first_cursor));
  last_return_ = 0;
}

void AsyncController::requeue_lost(const BufferSnapshot& snapshot, uint64_t from, Deadline deadline) {
  std::set<std::string> done;  // task ids handed out (any attempt) or waiting in the buffer
  for (const std::string& key : snapshot.seen) done.insert(key.substr(0, key.rfind('#')));
  for (const auto* records : {&snapshot.pending, &snapshot.ungot}) {
    for (const ExperienceRecord& r : *records) done.insert(r.task_id);
  }
  int64_t requeued = 0;
  for (uint64_t c = from; c < snapshot.data_cursor; ++c) {
    TaskUnit u = factory_(c, 0);
    if (done.count(u.task_id)) continue;
    queue_.enqueue(u, deadline);
    ++requeued;
  }
  // A stale record's regeneration (attempt + 1) queued at the checkpoint: the stale attempt
  // is in `seen`, the new one is not.
  std::set<std::string> keys(snapshot.seen.begin(), snapshot.seen.end());
  for (const auto* records : {&snapshot.pending, &snapshot.ungot}) {
    for (const ExperienceRecord& r : *records) keys.insert(dedupe_key(r.task_id, r.attempt));
  }
  for (const auto& [id, at] : regenerating_) {
    if (keys.count(dedupe_key(id, at.second))) continue;
    queue_.enqueue(factory_(at.first, at.second), deadline);
    ++requeued;
  }
  if (requeued > 0) {
    MOERL_LOG(WARN) << "controller: the task queue lost " << requeued << " task(s) created before the checkpoint "
                    << "(a non-durable queue after a restart); enqueued them again";
    acc_->add(Counter::kTasksRequeued, requeued);
  }
}

AccountingReport AsyncController::report(Deadline deadline) {
  QueueDepth d = queue_.depth(deadline);
  acc_->set_queue_depth(d.queued());
  acc_->set(Counter::kDeadLettered, d.dead);
  return acc_->report(d.queued() + buffer_.stats().available);
}

}  // namespace moerl::runtime
