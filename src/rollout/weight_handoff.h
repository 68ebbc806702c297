// WeightHandoff: policy versions handed from the trainer to rollout workers in memory, for the
// embedded mode where both are threads of one process. The trainer puts a copy of its
// parameters and announces the returned location ("memory:vN") in the WeightRegistry as
// usual; a worker that holds the same handoff takes the copy instead of reading the object
// store. Versioning, staging and activation are unchanged; only the transport is skipped
// (no safetensors, sha256 or commit on the trainer's critical path). Workers in other
// processes never see a "memory:" location: their trainer publishes through the store.
//
//   auto handoff = std::make_shared<WeightHandoff>();
//   registry.publish(v, handoff->put(v, policy), d);            // trainer
//   if (auto snap = handoff->get(location)) model.load_weights(snap->params);   // worker
// Thread-safe. Snapshots are immutable once put: readers copy, never write into them.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include "io/hf_config.h"
#include "model/model.h"

namespace moerl::rollout {

struct WeightSnapshot {
  uint64_t version = 0;
  io::HfConfig config;
  model::Params params;  // detached copies, on the trainer's device and dtype
};

class WeightHandoff {
 public:
  explicit WeightHandoff(size_t keep = 2) : keep_(keep) {}
  // Copies the policy's parameters as `version`; returns the location to announce.
  std::string put(uint64_t version, const model::Model& policy);
  // The snapshot at a location put() returned; nullptr for any other location (a store
  // prefix) or a version already dropped (only the newest `keep` are held).
  std::shared_ptr<const WeightSnapshot> get(const std::string& location) const;
  static bool is_memory_location(const std::string& location);

 private:
  const size_t keep_;
  mutable std::mutex mu_;
  std::deque<std::shared_ptr<const WeightSnapshot>> snapshots_;  // guarded by mu_, oldest first
};

}  // namespace moerl::rollout
