// The async trainer's queue depth: runtime.queue_ahead, or the automatic rule (queue_ahead.h).
#include "job/queue_ahead.h"

#include <algorithm>

#include "base/log.h"

namespace moerl::job {

namespace {

QueueAhead pick(const JobConfig& cfg) {
  const int64_t P = cfg.rollout.prompts_per_step;
  const int64_t S = static_cast<int64_t>(cfg.runtime.max_staleness);
  const std::string p = "prompts_per_step " + std::to_string(P);
  const std::string s = "max_staleness " + std::to_string(S);
  QueueAhead q;
  if (cfg.runtime.queue_ahead > 0) {
    q.tasks = cfg.runtime.queue_ahead;
    q.why = "runtime.queue_ahead = " + std::to_string(q.tasks);
    // NOTE: a warning, not an error: the stale policy (drop or regenerate) still bounds what is
    // trained, and someone measuring the trade-off may want exactly this.
    if (q.tasks > P * S) {
      const bool drop = cfg.runtime.stale_policy == runtime::StalePolicy::kDrop;
      q.warning = "trainer: runtime.queue_ahead = " + std::to_string(q.tasks) + " is above " + p + " x " + s + " = " +
                  std::to_string(P * S) + ": groups come back about queue_ahead / prompts_per_step + 1 = " +
                  std::to_string(q.tasks / P + 1) + " versions old, so many may exceed max_staleness and be " +
                  (drop ? "dropped" : "regenerated") + " (runtime.stale_policy = \"" +
                  runtime::stale_policy_name(cfg.runtime.stale_policy) +
                  "\"); raise runtime.max_staleness, or set runtime.queue_ahead = 0 for the automatic depth";
    }
    return q;
  }
  const int64_t leases = cfg.runtime.tasks_per_lease * cfg.rollout.num_workers;
  const std::string l = "tasks_per_lease " + std::to_string(cfg.runtime.tasks_per_lease) + " x num_workers " +
                        std::to_string(cfg.rollout.num_workers);
  q.tasks = std::max(P, leases);
  q.why = leases > P ? l : p + " (>= " + l + ")";
  if (cfg.rollout.gen.streaming) {
    // Staleness ~ queue_ahead / P + 1 versions (docs/perf.md): P x (S - 1) keeps it within S.
    const int64_t deep = S > 1 ? P * (S - 1) : 0;
    const std::string rule = p + " x (" + s + " - 1)";
    if (deep > q.tasks) {
      q.why = "streaming workers: " + rule;
      q.tasks = deep;
    } else if (S > 1) {
      q.why = "streaming workers: " + q.why + ", at least " + rule + " = " + std::to_string(deep);
    } else {
      q.why = "streaming workers, but " + s + " leaves no room to queue deeper: " + q.why;
    }
  }
  return q;
}

}  // namespace

QueueAhead queue_ahead(const JobConfig& cfg) {
  QueueAhead q = pick(cfg);
  // Said here because the depth then seen in the metrics is larger than q.tasks.
  if (cfg.rollout.dynamic_sampling) {
    q.why += "; dynamic sampling keeps up to max_sampling_rounds " + std::to_string(cfg.rollout.max_sampling_rounds) +
             " x that ahead while it filters groups";
  }
  return q;
}

int64_t log_queue_ahead(const QueueAhead& q) {
  MOERL_LOG(INFO) << "trainer: " << q.tasks << " tasks ahead (" << q.why << ")";
  if (!q.warning.empty()) {
    MOERL_LOG(WARN) << q.warning;
  }
  return q.tasks;
}

}  // namespace moerl::job
