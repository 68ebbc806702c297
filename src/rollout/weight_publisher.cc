// Publishing and fetching policy weight versions through the commit protocol.
#include "rollout/weight_publisher.h"

#include <cinttypes>
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "base/files.h"
#include "base/error.h"
#include "base/log.h"
#include "io/tensor_io.h"
#include "store/commit.h"

namespace moerl::rollout {

namespace fs = std::filesystem;

std::string weights_prefix(uint64_t version) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%s/v%08" PRIu64, kWeightsRoot, version);
  return buf;
}

std::string publish_weights(store::ObjectStore& store, runtime::WeightRegistry& registry, uint64_t version,
                            const model::Model& policy, const std::string& scratch_dir,
                            const PublishOptions& options, Deadline deadline) {
  const std::string prefix = weights_prefix(version);
  fs::path dir = fs::path(scratch_dir) / ("publish-v" + std::to_string(version));
  remove_tree(dir.string());
  fs::create_directories(dir);
  policy.save(dir.string());
  store::CommitWriter w(store, prefix);
  w.put_file("config.json", (dir / "config.json").string());
  w.put_file("model.safetensors", (dir / "model.safetensors").string());
  w.commit({{"version", version}, {"kind", "policy-weights"}});
  remove_tree(dir.string());
  registry.publish(version, prefix, deadline);
  if (options.keep > 0) store::retain_latest(store, kWeightsRoot, options.keep);
  return prefix;
}

VersionPublisher::VersionPublisher(store::ObjectStore& store, runtime::WeightRegistry& registry,
                                   std::shared_ptr<WeightHandoff> handoff, std::string scratch_dir,
                                   VersionPolicy policy)
    : store_(store), registry_(registry), handoff_(std::move(handoff)), scratch_dir_(std::move(scratch_dir)),
      policy_(policy) {}

bool VersionPublisher::due(uint64_t version) const {
  return version % static_cast<uint64_t>(std::max<int64_t>(1, policy_.every)) == 0;
}

bool VersionPublisher::claim(uint64_t version) {
  const std::string prefix = weights_prefix(version);
  if (handoff_) return !store_.head(prefix + "/" + store::kManifestName);
  // Anything under the prefix (a predecessor's shards, its claim): another life's version,
  // perhaps still being written by a trainer that froze mid-publication and will wake up.
  if (!store_.list(prefix + "/").empty()) return false;
  return store_.put_if_absent(prefix + "/" + kClaimName, scratch_dir_ + "\n") == store::PutOutcome::kCreated;
}

uint64_t VersionPublisher::publish(uint64_t version, const model::Model& model, Deadline deadline) {
  uint64_t v = version;
  if (first_) {
    if (auto latest = registry_.latest(deadline); latest && latest->version >= v) v = latest->version + 1;
    first_ = false;
  }
  while (!claim(v)) ++v;
  if (handoff_) {
    registry_.publish(v, handoff_->put(v, model), deadline);  // in-process workers: in memory
  } else {
    publish_weights(store_, registry_, v, model, scratch_dir_, {.keep = policy_.keep}, deadline);
  }
  return v;
}

StagedWeights fetch_weights(store::ObjectStore& store, const std::string& prefix, const std::string& scratch_dir) {
  store::CommitReader r = store::CommitReader::open(store, prefix);
  const nlohmann::json& extra = r.manifest().extra;
  if (!extra.contains("version") || !extra["version"].is_number_unsigned()) {
    throw Error("weights: manifest of " + prefix + " has no unsigned 'version' in its extra field",
                "weights commits are written by publish_weights (docs/formats/weights_version.md)",
                ErrorCode::kIo);
  }
  StagedWeights s;
  s.version = extra["version"].get<uint64_t>();
  fs::path dir = fs::path(scratch_dir) / ("v" + std::to_string(s.version));
  fs::create_directories(dir);
  r.get_file("config.json", (dir / "config.json").string());         // size + sha256 checked
  r.get_file("model.safetensors", (dir / "model.safetensors").string());
  s.dir = dir.string();
  s.params = io::load_tensors((dir / "model.safetensors").string());
  return s;
}

}  // namespace moerl::rollout
