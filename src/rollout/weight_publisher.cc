// Publishing and fetching policy weight versions through the commit protocol.
#include "rollout/weight_publisher.h"

#include <cinttypes>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

#include "base/files.h"
#include "base/error.h"
#include "base/log.h"
#include "io/tensor_io.h"
#include "model/expert_names.h"
#include "model/sharded_files.h"
#include "store/commit.h"

namespace moerl::rollout {

namespace fs = std::filesystem;

std::string weights_prefix(uint64_t version) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%s/v%08" PRIu64, kWeightsRoot, version);
  return buf;
}

namespace {

constexpr const char* kKind = "policy-weights";

// One rank's part of a sharded version: its shard file under the version's prefix; returns
// what the committing rank needs ({"shard": description, "entry": commit entry}).
nlohmann::json put_shard(store::CommitWriter& w, const model::Model& policy, int rank, int world,
                         const fs::path& dir) {
  nlohmann::json meta = model::write_model_shard(policy, rank, world, dir.string());
  const std::string file = meta["file"].get<std::string>();
  w.put_file(file, (dir / file).string());
  return {{"shard", meta}, {"entry", store::to_json(w.entries().back())}};
}

}  // namespace

std::string publish_weights(store::ObjectStore& store, runtime::WeightRegistry& registry, uint64_t version,
                            const model::Model& policy, const std::string& scratch_dir,
                            const PublishOptions& options, Deadline deadline) {
  const std::string prefix = weights_prefix(version);
  const int rank = options.group ? options.group->rank() : 0;
  const int world = options.group ? options.group->world_size() : 1;
  fs::path dir = fs::path(scratch_dir) / ("publish-v" + std::to_string(version) + "-rank-" + std::to_string(rank));
  remove_tree(dir.string());
  fs::create_directories(dir);
  store::CommitWriter w(store, prefix);
  auto commit = [&] {
    w.commit({{"version", version}, {"kind", kKind}, {"ranks", world}});
    registry.publish(version, prefix, deadline);
    if (options.keep > 0) store::retain_latest(store, kWeightsRoot, options.keep);
    return std::string();
  };
  if (world == 1) {
    policy.save(dir.string());
    w.put_file("config.json", (dir / "config.json").string());
    w.put_file("model.safetensors", (dir / "model.safetensors").string());
    commit();
  } else {
    // Every rank puts its shard in parallel; rank 0 adopts the others' and commits.
    std::vector<std::string> parts = options.group->gather(put_shard(w, policy, rank, world, dir).dump());
    options.group->lead_runs("publishing weights v" + std::to_string(version), [&] {
      std::vector<nlohmann::json> shards;
      for (int r = 0; r < world; ++r) {
        nlohmann::json part = nlohmann::json::parse(parts[r]);
        shards.push_back(part["shard"]);
        if (r > 0) w.adopt(store::commit_entry_from_json(part["entry"], "rank " + std::to_string(r) + "'s shard"));
      }
      w.put_bytes(model::kShardIndexFile, model::shard_index_json(shards));
      model::write_model_config(policy, dir.string());
      w.put_file("config.json", (dir / "config.json").string());
      return commit();
    });
  }
  remove_tree(dir.string());
  return prefix;
}

TensorFilter local_tensors(const ep::Group& group) {
  const int64_t per = group.num_experts() / group.world_size();
  const int64_t lo = per * group.rank(), hi = lo + per;
  return [lo, hi](const std::string& name) {
    const std::optional<int64_t> e = model::routed_expert_index(name);
    return !e || (*e >= lo && *e < hi);
  };
}

VersionPublisher::VersionPublisher(store::ObjectStore& store, runtime::WeightRegistry& registry,
                                   std::shared_ptr<WeightHandoff> handoff, std::string scratch_dir,
                                   VersionPolicy policy, std::shared_ptr<SharedWeightsWriter> shared)
    : store_(store), registry_(registry), handoff_(std::move(handoff)), shared_(std::move(shared)),
      scratch_dir_(std::move(scratch_dir)), policy_(std::move(policy)) {
  if ((handoff_ || shared_) && policy_.group && policy_.group->world_size() > 1) {
    throw Error("weights: in-memory and shared-memory versions are written by one trainer process",
                "a trainer group publishes through the store", ErrorCode::kInvalidInput);
  }
}

bool VersionPublisher::due(uint64_t version) const {
  return version % static_cast<uint64_t>(std::max<int64_t>(1, policy_.every)) == 0;
}

bool VersionPublisher::claim(uint64_t version) {
  const std::string prefix = weights_prefix(version);
  if (handoff_ || shared_) return !store_.head(prefix + "/" + store::kManifestName);
  // Anything under the prefix (a predecessor's shards, its claim): another life's version,
  // perhaps still being written by a trainer that froze mid-publication and will wake up.
  if (!store_.list(prefix + "/").empty()) return false;
  return store_.put_if_absent(prefix + "/" + kClaimName, scratch_dir_ + "\n") == store::PutOutcome::kCreated;
}

uint64_t VersionPublisher::pick(uint64_t version, Deadline deadline) {
  uint64_t v = version;
  if (first_) {
    if (auto latest = registry_.latest(deadline); latest && latest->version >= v) v = latest->version + 1;
    first_ = false;
  }
  while (!claim(v)) ++v;
  return v;
}

uint64_t VersionPublisher::publish(uint64_t version, const model::Model& model, Deadline deadline,
                                   const std::function<void()>& check) {
  const std::shared_ptr<ep::ControlGroup>& group = policy_.group;
  if (group && group->world_size() > 1) {
    const uint64_t v = std::stoull(group->lead_runs("claiming a weight version", [&] {
      if (check) check();
      return std::to_string(pick(version, deadline));
    }));
    publish_weights(store_, registry_, v, model, scratch_dir_, {.keep = policy_.keep, .group = group}, deadline);
    return v;
  }
  if (check) check();
  const uint64_t v = pick(version, deadline);
  if (handoff_) {
    registry_.publish(v, handoff_->put(v, model), deadline);  // in-process workers: in memory
  } else if (shared_) {
    registry_.publish(v, shared_->put(v, model), deadline);  // worker processes on this host
  } else {
    publish_weights(store_, registry_, v, model, scratch_dir_, {.keep = policy_.keep}, deadline);
  }
  return v;
}

StagedWeights fetch_weights(store::ObjectStore& store, const std::string& prefix, const std::string& scratch_dir,
                            const TensorFilter& wanted) {
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
  r.get_file("config.json", (dir / "config.json").string());  // size + sha256 checked
  if (!r.has(model::kShardIndexFile)) {
    r.get_file("model.safetensors", (dir / "model.safetensors").string());
  } else {
    // A trainer group's version: only the shards holding tensors this reader wants, and an
    // index of just those tensors (load_tensors loads what the index lists).
    const std::string where = store.uri() + "/" + prefix + "/" + model::kShardIndexFile;
    nlohmann::json index = nlohmann::json::parse(r.get_bytes(model::kShardIndexFile), nullptr, false);
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
      throw Error("weights: " + where + " is not an index with a weight_map", "the version is damaged; use a newer one",
                  ErrorCode::kIo);
    }
    nlohmann::json kept = nlohmann::json::object();
    std::set<std::string> files;
    for (const auto& [name, file] : index["weight_map"].items()) {
      if (wanted && !wanted(name)) continue;
      kept[name] = file;
      files.insert(file.get<std::string>());
    }
    for (const std::string& f : files) r.get_file(f, (dir / f).string());
    write_file_atomic((dir / model::kShardIndexFile).string(),
                      nlohmann::json{{"metadata", index.value("metadata", nlohmann::json::object())},
                                     {"weight_map", kept}}.dump(2));
  }
  s.dir = dir.string();
  s.params = io::load_tensors(dir.string());
  if (wanted) std::erase_if(s.params, [&](const auto& kv) { return !wanted(kv.first); });
  return s;
}

}  // namespace moerl::rollout
