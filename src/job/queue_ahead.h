// How many tasks the async trainer keeps ahead of training (queued, leased, or records waiting
// in the buffer): runtime.queue_ahead when set, else a depth derived from the rollout shape.
// Pure function of the config; the controller (runtime/controller.h) applies it, and with
// dynamic sampling scales it by the kept fraction (max_queue_factor), which this leaves alone.
//
//   QueueAhead q = queue_ahead(cfg);   // q.tasks = 80, q.why = "streaming workers: ..."
//   cc.queue_ahead = log_queue_ahead(q);
#pragma once

#include <cstdint>
#include <string>

#include "job/job_config.h"

namespace moerl::job {

struct QueueAhead {
  int64_t tasks = 0;    // >= 1
  std::string why;      // for the log: which rule and values gave `tasks`
  std::string warning;  // "" or why this depth may bring groups back staler than allowed
};

// runtime.queue_ahead when set (>= 1); otherwise base = max(prompts_per_step,
// tasks_per_lease x num_workers), and with rollout.streaming max(base, prompts_per_step x
// (max_staleness - 1)). Why the streaming term: a streaming worker's group holds its lease
// until its longest sample ends, so a shallow queue leaves most of its rows idle, while trained
// groups come back about queue_ahead / prompts_per_step + 1 versions old (docs/perf.md, "The
// streaming worker as its own process"): P x (S - 1) is the deepest queue within S.
QueueAhead queue_ahead(const JobConfig& cfg);

// Logs the depth and why (INFO) and the warning if any (WARN); returns q.tasks. Call once,
// where the trainer starts.
int64_t log_queue_ahead(const QueueAhead& q);

}  // namespace moerl::job
