// The async job on one machine (`moerl train --mode async`): the trainer in this process and
// rollout.num_workers rollout workers beside it: threads over in-process backends (versions
// handed over in memory), or, when runtime.queue_url is Redis, child processes running
// `moerl rollout` exactly as the rollout pods do. Workers are stopped (drained) when the
// trainer returns, and every child is reaped before this returns or throws.
//
//   nlohmann::json s = run_local_async(cfg, {.run_dir = "runs/async"});
// Failures: moerl::Error from the trainer or the first failing worker thread.
#pragma once

#include <nlohmann/json.hpp>

#include "job/job_config.h"
#include "job/run_context.h"

namespace moerl::job {

nlohmann::json run_local_async(const JobConfig& cfg, const JobOptions& options);

}  // namespace moerl::job
