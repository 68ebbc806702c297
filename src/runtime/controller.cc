// AsyncController: queue top-up, stale handling and trainer idle accounting.
#include "runtime/controller.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <thread>

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
      cursor_(config_.first_cursor),
      settled_below_(config_.first_cursor) {
  config_.validate();
  buffer_.set_quarantine(config_.check, [this](const QuarantinedRecord& q) { return on_quarantine(q); });
  push_watermark();  // records of cursors before this run's are not its own
}

AsyncController::~AsyncController() { buffer_.set_quarantine({}, {}); }

std::optional<uint64_t> AsyncController::on_quarantine(const QuarantinedRecord& q) {
  acc_->add(Counter::kRecordsQuarantined);
  if (q.task_id.empty() || q.key_taken) return std::nullopt;  // names no task, or one already trained
  return reschedule(q.task_id, q.attempt, q.decoded ? std::optional<uint64_t>(q.cursor) : std::nullopt,
                    /*limited=*/true, "was quarantined (" + q.reason + ")");
}

std::optional<uint64_t> AsyncController::reschedule(const std::string& task_id, uint32_t attempt,
                                                    std::optional<uint64_t> cursor, bool limited,
                                                    const std::string& why) {
  const std::string key = dedupe_key(task_id, attempt);
  if (config_.task_cursor) {
    if (auto c = config_.task_cursor(task_id)) cursor = c;
  }
  // NOTE: the factory runs only on cursors this run created (a forged one may be anything).
  if (!cursor || *cursor < config_.first_cursor || *cursor >= cursor_ || factory_(*cursor, 0).task_id != task_id) {
    MOERL_LOG(WARN) << "controller: record " << key << " " << why << " names no task this run created; "
                    << "nothing to re-create";
    return std::nullopt;
  }
  if (settled(*cursor)) return std::nullopt;  // trained (or given up) already: nothing to wait for
  auto regen = regenerating_.find(task_id);
  const uint32_t live = regen == regenerating_.end() ? 0 : regen->second.second;
  if (attempt != live) return std::nullopt;  // not the attempt the run waits for: that one still comes
  if (limited && attempt + 1 >= kMaxQuarantinedAttempts) {
    MOERL_LOG(ERROR) << "controller: task " << task_id << " given up after " << kMaxQuarantinedAttempts
                     << " quarantined records (last " << why << "); it is not trained";
    regenerating_.erase(task_id);
    acc_->add(Counter::kTasksAbandoned);
    settle(*cursor);
    return cursor;
  }
  if (limited) {
    MOERL_LOG(WARN) << "controller: task " << task_id << " is enqueued again (attempt " << attempt + 1
                    << ") after its record " << key << " " << why;
  }
  regenerating_[task_id] = {*cursor, attempt + 1};
  requeue_.emplace_back(*cursor, attempt + 1);
  return cursor;
}

void AsyncController::settle(uint64_t cursor) {
  if (cursor < settled_below_ || cursor >= cursor_) return;  // settled, or not a task this run created
  settled_.insert(cursor);
  while (!settled_.empty() && *settled_.begin() == settled_below_) {
    settled_.erase(settled_.begin());
    ++settled_below_;
  }
}

void AsyncController::push_watermark() {
  if (settled_below_ == pushed_below_) return;
  buffer_.settle_below(settled_below_);
  pushed_below_ = settled_below_;
}

void AsyncController::settle_record(const ExperienceRecord& r) {
  // NOTE: only a record whose id names its cursor settles it (a forged cursor settles nothing).
  const std::optional<uint64_t> named = config_.task_cursor ? config_.task_cursor(r.task_id) : std::nullopt;
  if (named ? *named == r.cursor : r.cursor < cursor_ && factory_(r.cursor, 0).task_id == r.task_id) settle(r.cursor);
}

void AsyncController::settle_dead_letters(int64_t dead, Deadline deadline) {
  if (dead <= dead_settled_) return;
  for (const TaskUnit& t : queue_.dead_letters(deadline)) {
    if (factory_(t.cursor, 0).task_id == t.task_id) settle(t.cursor);
  }
  dead_settled_ = dead;
}

void AsyncController::drop_dead_lineage(std::vector<ExperienceRecord>& got) {
  if (!config_.lineage) return;
  int64_t dropped = 0, requeued = 0;
  uint64_t lo = UINT64_MAX, hi = 0;
  auto foreign = [&](const ExperienceRecord& r) {
    const std::optional<uint64_t> v = config_.lineage->foreign_version(r);
    if (!v) return false;
    ++dropped;
    lo = std::min(lo, *v);
    hi = std::max(hi, *v);
    if (reschedule(r.task_id, r.attempt, r.cursor, /*limited=*/false, "is from a lost trainer life")) ++requeued;
    return true;
  };
  got.erase(std::remove_if(got.begin(), got.end(), foreign), got.end());
  if (dropped == 0) return;
  acc_->add(Counter::kDeadLineage, dropped);
  MOERL_LOG(WARN) << "controller: dropped " << dropped << " record(s) generated with policy version(s) " << lo
                  << (lo == hi ? "" : ".." + std::to_string(hi)) << ", which are not in this trainer's lineage ("
                  << config_.lineage->describe() << "): a trainer life that ended after its last checkpoint "
                  << "published them; " << requeued << " task(s) enqueued again";
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
  if (const uint64_t recorded = queue_.producer_cursor(deadline); recorded < recorded_) {
    recover_lost_writes(recorded, deadline);
  }
  const QueueDepth depth = queue_.depth(deadline);
  settle_dead_letters(depth.dead, deadline);
  int64_t queued = depth.queued();
  // Records generated but not yet trained are work ahead too: counting them keeps the
  // pipeline one step deep, so records reach the trainer ~1 version old, not 2.
  const int64_t waiting = buffer_.stats().available;
  int64_t n = 0;
  const int64_t target = queue_target();
  while (queued + waiting + n < target && !exhausted()) {
    // Idempotent: after a restart, tasks a previous life already enqueued are skipped.
    try {
      if (queue_.enqueue_from(factory_(cursor_, 0), cursor_ + 1, deadline)) ++n;
      recorded_ = std::max(recorded_, cursor_ + 1);  // enqueued now, or by a previous life
    } catch (const Error& e) {
      // A queue that refuses writes (Redis at its maxmemory, or down) is not the end of the
      // run: train what is buffered (checkpoints trim the stream) and top up next time.
      if (e.code() != ErrorCode::kUnavailable) throw;
      MOERL_LOG(WARN) << "controller: could not enqueue task " << cursor_ << " (" << e.what() << "); training what "
                      << "is buffered and trying again at the next batch";
      break;
    }
    ++cursor_;
  }
  // NOTE: created is the dataset span handed out, so it survives restarts exactly.
  acc_->set(Counter::kTasksCreated, static_cast<int64_t>(cursor_ - config_.first_cursor));
  acc_->set_queue_depth(queued + n);
  push_watermark();
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
    std::vector<ExperienceRecord> got;
    if (!take_riding_outages(n - out.size(), slice, got)) {
      if (deadline.expired()) break;
      continue;
    }
    acc_->set(Counter::kDuplicatesDropped, buffer_.stats().duplicates_dropped);
    drop_dead_lineage(got);
    for (const auto& [cursor, attempt] : requeue_) {
      queue_.enqueue(factory_(cursor, attempt), Deadline::after_seconds(config_.call_timeout_seconds));
      acc_->add(Counter::kTasksRequeued);
    }
    requeue_.clear();
    // Every task created and none left in the queue: nothing more can arrive (a filtered or
    // dropped tail leaves the batch short).
    if (got.empty() && exhausted() &&
        queue_.depth(Deadline::after_seconds(config_.call_timeout_seconds)).queued() == 0) {
      break;
    }
    StaleSplit split = config_.stale.apply(std::move(got), current_version, acc_);
    for (ExperienceRecord& r : split.keep) {
      regenerating_.erase(r.task_id);
      settle_record(r);
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
    for (const ExperienceRecord& r : split.stale) {
      if (config_.stale.policy == StalePolicy::kDrop) {
        settle_record(r);
        continue;
      }
      TaskUnit again = factory_(r.cursor, r.attempt + 1);
      regenerating_[again.task_id] = {r.cursor, again.attempt};
      queue_.enqueue(again, Deadline::after_seconds(config_.call_timeout_seconds));
    }
    push_watermark();
    if (deadline.expired()) break;
  }
  last_return_ = now_seconds();
  acc_->add_role_time(Role::kTrainer, 0, last_return_ - entered);
  return out;
}

bool AsyncController::take_riding_outages(size_t n, Deadline slice, std::vector<ExperienceRecord>& got) {
  try {
    got = buffer_.take(n, slice);
  } catch (const Error& e) {
    // A buffer that is down (Redis restarting, a network blip) is waited out for up to
    // call_timeout_seconds, like every other call, instead of ending the run at once.
    if (e.code() != ErrorCode::kUnavailable) throw;
    const double now = now_seconds();
    if (outage_since_ == 0) {
      outage_since_ = now;
      MOERL_LOG(WARN) << "controller: the experience buffer is unavailable (" << e.what() << "); waiting up to "
                      << config_.call_timeout_seconds << " s for it";
    }
    if (now - outage_since_ > config_.call_timeout_seconds) {
      throw Error("controller: the experience buffer has been unavailable for " +
                      std::to_string(static_cast<int64_t>(now - outage_since_)) + " s; last: " + e.what(),
                  "bring the queue service back (runtime.queue_url), or raise runtime.call_timeout_seconds to ride "
                  "through longer outages",
                  ErrorCode::kUnavailable);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return false;
  }
  if (outage_since_ != 0) {
    MOERL_LOG(INFO) << "controller: the experience buffer is back after " << now_seconds() - outage_since_ << " s";
    outage_since_ = 0;
  }
  return true;
}

int64_t AsyncController::task_budget() const {
  // A stale group dropped (kDrop) is replaced by a fresh prompt, so the run still trains
  // total_tasks groups; the count is in the accounting, so it survives a restart.
  return config_.total_tasks +
         (config_.stale.policy == StalePolicy::kDrop ? acc_->get(Counter::kStaleDropped) : 0);
}

bool AsyncController::exhausted() const {
  return config_.total_tasks > 0 && static_cast<int64_t>(cursor_ - config_.first_cursor) >= task_budget();
}

bool AsyncController::finished(Deadline deadline) {
  if (config_.total_tasks == 0) return false;
  int64_t created = acc_->get(Counter::kTasksCreated);
  if (created < task_budget()) return false;
  int64_t dead = queue_.depth(deadline).dead;
  return acc_->get(Counter::kTasksCompleted) + dead + acc_->get(Counter::kTasksAbandoned) >= created;
}

BufferSnapshot AsyncController::snapshot() {
  BufferSnapshot s = buffer_.snapshot();
  s.data_cursor = cursor_;
  nlohmann::json regen = nlohmann::json::array();
  for (const auto& [id, at] : regenerating_) regen.push_back({at.first, at.second});
  s.extra = nlohmann::json{{"accounting", acc_->state()}, {"regenerating", regen}, {"settled", settled_},
                           {"dead_settled", dead_settled_}}
                .dump();
  return s;
}

void AsyncController::restore(const BufferSnapshot& snapshot, Deadline deadline) {
  buffer_.restore(snapshot, deadline);
  // Resume after whatever a previous life enqueued (Redis keeps it; in-process it is gone).
  const uint64_t queued_up_to = queue_.producer_cursor(deadline);
  cursor_ = std::max<uint64_t>({snapshot.data_cursor, queued_up_to, config_.first_cursor});
  recorded_ = queued_up_to;
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
    settled_ = j.value("settled", std::set<uint64_t>{});
    dead_settled_ = j.value("dead_settled", int64_t{0});
  }
  settled_below_ = std::max(settled_below_, snapshot.settled_below);
  std::erase_if(settled_, [&](uint64_t c) { return c < settled_below_; });
  pushed_below_ = 0;
  push_watermark();
  // A queue that does not remember the tasks before the checkpoint's cursor (in-process: a
  // new process) lost those still queued or leased: enqueue again each one the snapshot
  // does not show as handed to the trainer or waiting in the buffer.
  if (queued_up_to < snapshot.data_cursor) {
    requeue_lost(snapshot, std::max(queued_up_to, config_.first_cursor), deadline);
  }
  acc_->set(Counter::kTasksCreated, static_cast<int64_t>(cursor_ - config_.first_cursor));
  last_return_ = 0;
}

void AsyncController::recover_lost_writes(uint64_t recorded, Deadline deadline) {
  const uint64_t from = std::max(recorded, config_.first_cursor);
  MOERL_LOG(WARN) << "controller: the task queue's producer cursor is back at " << recorded << " after it had "
                  << "confirmed " << recorded_ << ": its server lost its last writes (restarted from an older "
                  << "AOF?); creating tasks " << from << ".." << cursor_ << " again and re-enqueueing "
                  << regenerating_.size() << " regeneration(s)";
  cursor_ = std::min(cursor_, from);
  recorded_ = recorded;
  // Copies of tasks that did reach the trainer before the loss are dropped as duplicates.
  for (const auto& [id, at] : regenerating_) {
    queue_.enqueue(factory_(at.first, at.second), deadline);
    acc_->add(Counter::kTasksRequeued);
  }
}

void AsyncController::requeue_lost(const BufferSnapshot& snapshot, uint64_t from, Deadline deadline) {
  std::set<std::string> done;  // task ids handed out (any attempt) or waiting in the buffer
  for (const auto& [key, task_cursor] : snapshot.seen) done.insert(key.substr(0, key.rfind('#')));
  for (const auto* records : {&snapshot.pending, &snapshot.ungot}) {
    for (const ExperienceRecord& r : *records) done.insert(r.task_id);
  }
  int64_t requeued = 0;
  for (uint64_t c = std::max(from, settled_below_); c < snapshot.data_cursor; ++c) {
    if (settled_.count(c)) continue;
    TaskUnit u = factory_(c, 0);
    if (done.count(u.task_id)) continue;
    queue_.enqueue(u, deadline);
    ++requeued;
  }
  // A stale record's regeneration (attempt + 1) queued at the checkpoint: the stale attempt
  // is in `seen`, the new one is not.
  std::set<std::string> keys;
  for (const auto& [key, task_cursor] : snapshot.seen) keys.insert(key);
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
