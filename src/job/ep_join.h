// Joining the ranks of an expert-parallel job (ep.size > 1, started by `moerl launch -n N`):
// checks the launch against the config, sizes the EP buffers for the largest forward the job
// makes, and joins the EP group and the data-parallel group. One rank (ep.size = 1) joins
// nothing, and refuses a multi-rank launch that would run the whole job N times.
//
//   EpJoin j = join_ep(cfg);   // j.group == nullptr on one rank
// Collective across the launch's ranks. Failures: moerl::Error naming the key and the fix.
#pragma once

#include <memory>

#include "ep/ep.h"
#include "job/job_config.h"
#include "train/dp_sync.h"

namespace moerl::job {

struct EpJoin {
  std::shared_ptr<ep::Group> group;
  std::shared_ptr<train::DataParallel> dp;
};

EpJoin join_ep(const JobConfig& cfg);

}  // namespace moerl::job
