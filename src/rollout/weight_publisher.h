// Versioned policy weights through the object store: the trainer publishes version v as a
// commit "weights/v%08d" (config.json + model.safetensors, then the manifest with sha256s)
// and announces it in the WeightRegistry; rollout workers fetch a version (every shard's size
// and sha256 checked) to stage it, then activate it with Model::load_weights between batches.
// Spec: docs/formats/weights_version.md.
//
//   publish_weights(*store, *registry, 7, policy, "/tmp/scratch", {.keep = 3}, d);
//   StagedWeights w = fetch_weights(*store, registry->latest(d)->location, "/tmp/w");
//   worker_model.load_weights(w.params);   // between generate() calls, never inside one
// Thread-safety: free functions; concurrent calls must use different scratch dirs.
// Failures: moerl::Error (a checksum mismatch names the object; a version removed by
// retention while it was read surfaces as kNotFound: fetch the newest instead).
#pragma once

#include <cstdint>
#include <string>

#include "base/deadline.h"
#include "model/model.h"
#include "runtime/weight_registry.h"
#include "store/object_store.h"

namespace moerl::rollout {

inline constexpr const char* kWeightsRoot = "weights";

// "weights/v00000007".
std::string weights_prefix(uint64_t version);

struct PublishOptions {
  size_t keep = 3;  // newest versions kept in the store (older ones removed after publishing)
};

// Writes `policy` as version `version`, announces it, prunes old versions. Returns the prefix.
// Publishing a version already committed with the same content is accepted (retry-safe).
std::string publish_weights(store::ObjectStore& store, runtime::WeightRegistry& registry, uint64_t version,
                            const model::Model& policy, const std::string& scratch_dir,
                            const PublishOptions& options, Deadline deadline);

struct StagedWeights {
  uint64_t version = 0;
  std::string dir;        // local copy: config.json + model.safetensors
  model::Params params;   // loaded tensors (HF names)
};

// Downloads and verifies the commit at `prefix` into scratch_dir/<vN>; reads the version from
// the manifest's extra field.
StagedWeights fetch_weights(store::ObjectStore& store, const std::string& prefix, const std::string& scratch_dir);

}  // namespace moerl::rollout
