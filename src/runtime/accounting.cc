// Accounting counters and their JSON export (summary.json "accounting").
#include "runtime/accounting.h"

#include <string>

#include "base/error.h"

namespace moerl::runtime {

const char* counter_name(Counter c) {
  switch (c) {
    case Counter::kTasksCreated: return "tasks_created";
    case Counter::kTasksCompleted: return "tasks_completed";
    case Counter::kSamplesTrained: return "samples_trained";
    case Counter::kSamplesGenerated: return "samples_generated";
    case Counter::kDuplicatesDropped: return "duplicates_dropped";
    case Counter::kStaleDropped: return "stale_dropped";
    case Counter::kTasksRequeued: return "tasks_requeued";
    case Counter::kDeadLettered: return "dead_lettered";
    case Counter::kGroupsFiltered: return "groups_filtered";
    case Counter::kRecordsQuarantined: return "records_quarantined";
    case Counter::kTasksAbandoned: return "tasks_abandoned";
    case Counter::kDeadLineage: return "records_dead_lineage";
    case Counter::kCount: break;
  }
  return "unknown";
}

void Accounting::record_staleness(uint64_t versions_behind) {
  std::lock_guard<std::mutex> lock(mu_);
  ++staleness_[versions_behind];
}

void Accounting::add_role_time(Role role, double busy_seconds, double idle_seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  busy_[static_cast<int>(role)] += busy_seconds;
  idle_[static_cast<int>(role)] += idle_seconds;
}

AccountingReport Accounting::report(int64_t still_queued) const {
  AccountingReport r;
  for (int i = 0; i < static_cast<int>(Counter::kCount); ++i) r.counters[i] = counters_[i].load();
  r.still_queued = still_queued;
  // NOTE: a stale record under the regenerate policy does not complete its task: the task is
  // re-enqueued (attempt + 1) and stays queued; under the drop policy it completes. So every
  // created task is completed, still queued, dead-lettered or abandoned (its records kept
  // failing the trainer's checks), or it was lost.
  r.lost = r.get(Counter::kTasksCreated) - r.get(Counter::kTasksCompleted) - still_queued -
           r.get(Counter::kDeadLettered) - r.get(Counter::kTasksAbandoned);
  r.queue_depth = queue_depth_.load();
  std::lock_guard<std::mutex> lock(mu_);
  r.staleness_histogram = staleness_;
  auto fraction = [](double idle, double busy) { return idle + busy > 0 ? idle / (idle + busy) : 0.0; };
  auto rate = [](int64_t n, double wall) { return wall > 0 ? static_cast<double>(n) / wall : 0.0; };
  const int t = static_cast<int>(Role::kTrainer);
  const int w = static_cast<int>(Role::kRollout);
  r.trainer_idle_fraction = fraction(idle_[t], busy_[t]);
  r.rollout_idle_fraction = fraction(idle_[w], busy_[w]);
  r.trainer_samples_per_second = rate(r.get(Counter::kSamplesTrained), busy_[t] + idle_[t]);
  r.rollout_samples_per_second = rate(r.get(Counter::kSamplesGenerated), busy_[w] + idle_[w]);
  return r;
}

nlohmann::json Accounting::state() const {
  nlohmann::json j;
  for (int i = 0; i < static_cast<int>(Counter::kCount); ++i) {
    j["counters"][counter_name(static_cast<Counter>(i))] = counters_[i].load();
  }
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json hist = nlohmann::json::object();
  for (const auto& [k, v] : staleness_) hist[std::to_string(k)] = v;
  j["staleness_histogram"] = hist;
  j["busy"] = busy_;
  j["idle"] = idle_;
  return j;
}

void Accounting::load_state(const nlohmann::json& j) {
  try {
    for (int i = 0; i < static_cast<int>(Counter::kCount); ++i) {
      counters_[i].store(j.at("counters").value(counter_name(static_cast<Counter>(i)), int64_t{0}));
    }
    std::lock_guard<std::mutex> lock(mu_);
    staleness_.clear();
    for (const auto& [k, v] : j.at("staleness_histogram").items()) {
      staleness_[std::stoull(k)] = v.get<int64_t>();
    }
    busy_ = j.at("busy").get<std::array<double, 2>>();
    idle_ = j.at("idle").get<std::array<double, 2>>();
  } catch (const std::exception& e) {
    throw Error(std::string("accounting state in the checkpoint is malformed: ") + e.what(),
                "the checkpoint was written by a different moerl build", ErrorCode::kIo);
  }
}

nlohmann::json AccountingReport::to_json() const {
  nlohmann::json j;
  for (int i = 0; i < static_cast<int>(Counter::kCount); ++i) {
    j[counter_name(static_cast<Counter>(i))] = counters[i];
  }
  j["still_queued"] = still_queued;
  j["lost"] = lost;
  nlohmann::json hist = nlohmann::json::object();
  for (const auto& [k, v] : staleness_histogram) hist[std::to_string(k)] = v;
  j["staleness_histogram"] = hist;
  j["queue_depth"] = queue_depth;
  j["trainer_idle_fraction"] = trainer_idle_fraction;
  j["rollout_idle_fraction"] = rollout_idle_fraction;
  j["throughput"] = {{"trainer_samples_per_s", trainer_samples_per_second},
                     {"rollout_samples_per_s", rollout_samples_per_second}};
  return j;
}

}  // namespace moerl::runtime
