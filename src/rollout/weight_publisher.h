// Versioned policy weights through the object store: the trainer publishes version v as a
// commit "weights/v%08d" (config.json + model.safetensors, then the manifest with sha256s;
// a trainer group of R ranks: one shard per rank, written by each rank in parallel, plus
// model.safetensors.index.json, model/sharded_files.h) and announces it in the
// WeightRegistry; rollout workers fetch a version (every shard's size and sha256 checked; an
// expert-parallel rank only the shards that hold its tensors) to stage it, then activate it
// with Model::load_weights between batches. Spec: docs/formats/weights_version.md.
//
//   publish_weights(*store, *registry, 7, policy, "/tmp/scratch", {.keep = 3}, d);
//   StagedWeights w = fetch_weights(*store, registry->latest(d)->location, "/tmp/w");
//   worker_model.load_weights(w.params);   // between generate() calls, never inside one
// Thread-safety: free functions; concurrent calls must use different scratch dirs.
// Failures: moerl::Error (a checksum mismatch names the object; a version removed by
// retention while it was read surfaces as kNotFound: fetch the newest instead).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/deadline.h"
#include "ep/ep.h"
#include "ep/torch/control_group.h"
#include "model/model.h"
#include "rollout/shared_weights.h"
#include "rollout/weight_handoff.h"
#include "runtime/weight_registry.h"
#include "store/object_store.h"

namespace moerl::rollout {

inline constexpr const char* kWeightsRoot = "weights";

// The object a trainer creates (conditionally) under a version's prefix before writing it.
inline constexpr const char* kClaimName = "CLAIM";

// "weights/v00000007".
std::string weights_prefix(uint64_t version);

struct PublishOptions {
  size_t keep = 3;  // newest versions kept in the store (older ones removed after publishing)
  // The trainer group's ranks, each holding its experts of `policy`; null: one process.
  std::shared_ptr<ep::ControlGroup> group;
};

// Writes `policy` as version `version`, announces it, prunes old versions. Returns the prefix.
// Publishing a version already committed with the same content is accepted (retry-safe).
// With options.group: collective; each rank writes its shard, rank 0 commits and announces.
std::string publish_weights(store::ObjectStore& store, runtime::WeightRegistry& registry, uint64_t version,
                            const model::Model& policy, const std::string& scratch_dir,
                            const PublishOptions& options, Deadline deadline);

// Which tensors of a version a reader needs; null: all of them.
using TensorFilter = std::function<bool(const std::string& name)>;
// The tensors an expert-parallel rank of `group` holds: every dense tensor, and the routed
// experts of its range (model::local_experts).
TensorFilter local_tensors(const ep::Group& group);

struct StagedWeights {
  uint64_t version = 0;
  std::string dir;        // local copy: config.json + model.safetensors
  model::Params params;   // loaded tensors (HF names)
};

// The trainer's weight-version policy: which version number a publication gets and how it
// travels. Versions only grow: the first publication of a (re)started trainer goes above
// every version the registry has announced, and no version with anything under its prefix
// is reused (a restarted trainer's lost versions are never published twice with other
// weights). Through the store a version is first claimed with a conditional create
// (kClaimName), so a frozen predecessor that wakes mid-publication and the trainer that
// replaced it never write the same prefix. With a WeightHandoff (every worker a thread of
// this process) a version travels in memory; without one, through the store.
//
//   VersionPublisher pub(*store, *registry, handoff, scratch, {.keep = 3, .every = 1});
//   state.policy_version = pub.publish(state.policy_version, policy, deadline);  // after a step
// Not thread-safe: the trainer thread publishes.
struct VersionPolicy {
  size_t keep = 3;      // versions kept in the store
  int64_t every = 1;    // publish when the version is a multiple of this (runtime.publish_every)
  // A trainer group of several ranks: publish() is collective, rank 0 picks the version and
  // commits, every rank writes its shard. Null: one process.
  std::shared_ptr<ep::ControlGroup> group;
};

class VersionPublisher {
 public:
  // `shared` (may be null): versions travel through shared memory on this host instead of
  // the store (workers in other processes on this host; rollout/shared_weights.h).
  VersionPublisher(store::ObjectStore& store, runtime::WeightRegistry& registry,
                   std::shared_ptr<WeightHandoff> handoff, std::string scratch_dir, VersionPolicy policy,
                   std::shared_ptr<SharedWeightsWriter> shared = nullptr);
  // True when `version` is due under policy.every.
  bool due(uint64_t version) const;
  // Publishes `model` as `version` or the next version above it that is free; returns the
  // version published (the same on every rank of a group). `check` (may be empty) runs on
  // the deciding rank before the version is claimed (the trainer lease's check).
  uint64_t publish(uint64_t version, const model::Model& model, Deadline deadline,
                   const std::function<void()>& check = {});

 private:
  // True when `version` is free and now ours to write.
  bool claim(uint64_t version);
  // The version number this publication gets (the registry and the store consulted).
  uint64_t pick(uint64_t version, Deadline deadline);
  store::ObjectStore& store_;
  runtime::WeightRegistry& registry_;
  std::shared_ptr<WeightHandoff> handoff_;
  std::shared_ptr<SharedWeightsWriter> shared_;
  const std::string scratch_dir_;
  const VersionPolicy policy_;
  bool first_ = true;
};

// Downloads and verifies the commit at `prefix` into scratch_dir/<vN>; reads the version from
// the manifest's extra field. A sharded version: only the shards holding a tensor `wanted`
// accepts are fetched (and an index of just those written), and params holds just those
// tensors' (load_model / Model::load_weights of an EP rank need no more).
StagedWeights fetch_weights(store::ObjectStore& store, const std::string& prefix, const std::string& scratch_dir,
                            const TensorFilter& wanted = {});

}  // namespace moerl::rollout
