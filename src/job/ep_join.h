// Joining the ranks of a trainer group or a rollout instance (several processes started by
// `moerl launch`): checks the launch against the config, sizes the EP buffers for the largest
// forward the role makes, and joins the EP group and the role's control group (the trainer's
// data-parallel group; the instance's ep::ControlGroup). One rank joins nothing, and refuses a
// multi-rank launch that would run the whole role N times.
//
//   EpJoin j = join_ep(cfg);                           // trainer: j.group == nullptr on one rank
//   RolloutInstance i = join_rollout_instance(cfg);    // rollout: i.ep == nullptr on one rank
// Collective across the launch's ranks. Failures: moerl::Error naming the key and the fix.
#pragma once

#include <memory>

#include "ep/ep.h"
#include "ep/torch/control_group.h"
#include "job/job_config.h"
#include "train/dp_sync.h"

namespace moerl::job {

struct EpJoin {
  std::shared_ptr<ep::Group> group;
  std::shared_ptr<train::DataParallel> dp;
};

// The trainer: ep.size ranks (`moerl train` in sync mode, `moerl trainer` in async mode).
EpJoin join_ep(const JobConfig& cfg);

struct RolloutInstance {
  std::shared_ptr<ep::Group> ep;
  std::shared_ptr<ep::ControlGroup> control;
};

// One rollout instance: rollout.ep_size ranks (`moerl rollout` under `moerl launch`).
RolloutInstance join_rollout_instance(const JobConfig& cfg);

// The EP group of a rollout instance's rank over `backend` (buffers sized for a lease's share
// of rows). Collective.
std::shared_ptr<ep::Group> rollout_ep_group(const JobConfig& cfg, const std::string& backend);

}  // namespace moerl::job
