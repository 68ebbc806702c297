// Starting a run over on a Redis namespace an earlier run used (`--fresh`): removes the
// earlier run's state from runtime.namespace, keeping what must only grow there. It touches
// neither the run dir nor the object store (the CLI removes the run dir), and in-process
// backends need nothing (they start empty).
//
//   uint64_t epoch = lease->acquire(deadline);   // first: a live trainer's namespace is never reset
//   NamespaceReset r = reset_namespace(cfg.runtime, *lease, deadline);
//   MOERL_LOG(INFO) << "removed " << r.removed.size() << " keys";
// Removed (RedisKeys::run_state): NS:tasks with its group "rollout", NS:tasks:dead,
// NS:tasks:cursor (the producer cursor), NS:experience with its trainer groups,
// NS:experience:quarantine and NS:experience:quarantine:ids. Kept: NS:trainer:lease (the
// caller's), NS:trainer:epoch, NS:weights and NS:weights:latest. Epochs and weight versions
// only grow in a namespace, so whatever of the earlier run still runs cannot pass for the new
// one: a frozen trainer of it stays fenced (its epoch is older), and a record its workers
// generate carries a version below the new run's first, outside its lineage, and is dropped.
// Failures: moerl::Error when `lease` is not (or no longer) this trainer's (nothing is
// removed), or when Redis does not answer by the deadline.
#pragma once

#include <string>
#include <vector>

#include "base/deadline.h"

namespace moerl::runtime {

struct RuntimeConfig;
class TrainerLease;

struct NamespaceReset {
  std::vector<std::string> removed;  // the keys that existed and were removed, in RedisKeys order
};

// Redis backend: checks `lease` (held by the caller), then removes the run-state keys in one
// atomic step. In-process: removes nothing.
NamespaceReset reset_namespace(const RuntimeConfig& config, TrainerLease& lease, Deadline deadline);

}  // namespace moerl::runtime
