// Expert-parallel checkpoints: one shard per rank, rank 0's index and manifest (see header).
#include "train/ep_checkpoint.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/error.h"
#include "base/log.h"
#include "io/tensor_io.h"
#include "store/commit.h"
#include "train/reward_model.h"

namespace moerl::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kStateFile = "trainer_state.json";  // as train/checkpoint.cc
constexpr const char* kIndexFile = "model.safetensors.index.json";

std::string numbered(const char* stem, int rank, int world) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%s-%05d-of-%05d.safetensors", stem, rank + 1, world);
  return buf;
}

// Same commit names as save_checkpoint, so one store holds either kind.
std::string step_name(const TrainerState& s) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "step-%08lld-sft-%06lld", static_cast<long long>(s.rl_step),
                static_cast<long long>(s.sft_step));
  return buf;
}

const char* dtype_json_name(at::ScalarType t) {
  switch (t) {
    case at::kBFloat16: return "bfloat16";
    case at::kHalf: return "float16";
    default: return "float32";
  }
}

// This rank's part of the model: its experts, plus the dense tensors on rank 0.
std::map<std::string, at::Tensor> shard_tensors(const model::Model& policy, int rank) {
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, t] : policy.state()) {  // buffers (dense) with rank 0's tensors
    if (rank != 0 && !is_expert_param(name)) continue;
    at::Tensor v = t.detach();
    if (v.scalar_type() == at::kDouble) v = v.to(at::kFloat);  // safetensors in moerl: no f64
    out[name] = v.cpu().contiguous();
  }
  return out;
}

// Writes this rank's shard to `path`; returns what rank 0 needs for the index.
json write_shard(const model::Model& policy, int rank, int world, const fs::path& path) {
  std::map<std::string, at::Tensor> tensors = shard_tensors(policy, rank);
  io::save_tensors(path.string(), tensors);
  json names = json::array();
  int64_t bytes = 0;
  for (const auto& [name, t] : tensors) {
    names.push_back(name);
    bytes += t.numel() * static_cast<int64_t>(t.element_size());
  }
  return {{"file", numbered("model", rank, world)}, {"names", names}, {"bytes", bytes}};
}

// model.safetensors.index.json from every rank's shard description (rank order).
std::string index_json(const std::vector<std::string>& metas) {
  json weight_map = json::object();
  int64_t total = 0;
  for (const std::string& m : metas) {
    json j = json::parse(m);
    for (const auto& n : j["names"]) weight_map[n.get<std::string>()] = j["file"];
    total += j["bytes"].get<int64_t>();
  }
  return json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2) + "\n";
}

void write_config(const model::Model& policy, const fs::path& dir) {
  io::HfConfig c = policy.config();
  c.torch_dtype = dtype_json_name(policy.dtype());
  c.save((dir / "config.json").string());
}

}  // namespace

void save_sharded_model(const std::string& dir, const model::Model& policy, const model::Tokenizer& tok,
                        DataParallel& dp) {
  fs::create_directories(dir);
  const int r = dp.rank(), R = dp.world_size();
  json meta = write_shard(policy, r, R, fs::path(dir) / numbered("model", r, R));
  std::vector<std::string> metas = dp.gather(meta.dump());
  if (r == 0) {
    std::error_code ec;
    fs::remove(fs::path(dir) / "model.safetensors", ec);  // a stale one-rank model must not sit beside the index
    std::ofstream(fs::path(dir) / kIndexFile) << index_json(metas);
    write_config(policy, dir);
    tok.save(dir);
  }
  dp.barrier("sharded model write");
}

std::string save_ep_checkpoint(store::ObjectStore& store, const std::string& root, const TrainerState& state,
                               const model::Model& policy, const model::Tokenizer& tok, PolicyTrainer& trainer,
                               int64_t keep, DataParallel& dp) {
  const int r = dp.rank(), R = dp.world_size();
  const std::string prefix = root + "/" + step_name(state);
  ScratchDir tmp("moerl-epckpt");
  const fs::path scratch(tmp.path());
  const std::string shard = numbered("model", r, R), opt = numbered("optimizer-rank", r, R);
  json meta = write_shard(policy, r, R, scratch / shard);
  io::save_tensors((scratch / opt).string(), trainer.optimizer().state());
  auto staging = [&](int rank) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), ".rank-%05d", rank + 1);
    return prefix + buf;
  };
  if (r != 0) {
    store.put_file(store::join_key(staging(r), shard), (scratch / shard).string());
    store.put_file(store::join_key(staging(r), opt), (scratch / opt).string());
  }
  // NOTE: the gather doubles as "my staging objects are uploaded".
  std::vector<std::string> metas = dp.gather(meta.dump());
  if (r == 0) {
    store::CommitWriter w(store, prefix);
    w.put_file("model/" + shard, (scratch / shard).string());
    w.put_file(opt, (scratch / opt).string());
    std::vector<std::string> staged;
    for (int s = 1; s < R; ++s) {
      for (const std::string& name : {numbered("model", s, R), numbered("optimizer-rank", s, R)}) {
        const std::string key = store::join_key(staging(s), name);
        store.get_file(key, (scratch / name).string());
        w.put_file(name.rfind("model-", 0) == 0 ? "model/" + name : name, (scratch / name).string());
        staged.push_back(key);
      }
    }
    w.put_bytes(std::string("model/") + kIndexFile, index_json(metas));
    fs::path cfg_dir = scratch / "cfg";
    fs::create_directories(cfg_dir);
    write_config(policy, cfg_dir);
    tok.save(cfg_dir.string());
    for (const auto& e : fs::directory_iterator(cfg_dir)) {
      w.put_file("model/" + e.path().filename().string(), e.path().string());
    }
    if (trainer.config().loss.uses_critic()) {  // dense: the same on every rank
      fs::path vh = scratch / kValueHeadFile;
      io::save_tensors(vh.string(), trainer.value_head());
      w.put_file(kValueHeadFile, vh.string());
    }
    w.put_bytes(kStateFile, state.to_json().dump(2));
    w.commit({{"rl_step", state.rl_step}, {"sft_step", state.sft_step}, {"ep_size", R}});
    for (const std::string& key : staged) store.remove(key);
    store::retain_latest(store, root, static_cast<size_t>(std::max<int64_t>(1, keep)), state.pinned_commits());
  }
  dp.barrier("checkpoint commit " + prefix);
  return prefix;
}

std::optional<LoadedCheckpoint> load_ep_checkpoint(store::ObjectStore& store, const std::string& root,
                                                   const std::string& scratch_dir, DataParallel& dp) {
  // Rank 0 picks the commit so every rank restores the same one.
  std::optional<store::CommitReader> latest = store::CommitReader::latest(store, root);
  std::string chosen = dp.broadcast(latest ? latest->prefix() : std::string());
  if (chosen.empty()) return std::nullopt;
  store::CommitReader r = store::CommitReader::open(store, chosen);
  LoadedCheckpoint ck;
  ck.prefix = r.prefix();
  const std::string where = store.uri() + "/" + ck.prefix;
  ck.state = TrainerState::from_json(json::parse(r.get_bytes(kStateFile), nullptr, false), where);
  const std::string opt = numbered("optimizer-rank", dp.rank(), dp.world_size());
  if (!r.has(opt)) {
    const json& extra = r.manifest().extra;
    throw Error("checkpoint " + where + " has no optimizer state " + opt + " (written with ep.size=" +
                    (extra.contains("ep_size") ? extra["ep_size"].dump() : std::string("1")) + ", resuming with " +
                    std::to_string(dp.world_size()) + " ranks)",
                "resume with the ep.size the run was started with, or start fresh (--fresh)");
  }
  ck.model_dir = fetch_commit_model(r, scratch_dir);
  fs::path opt_path = fs::path(scratch_dir) / opt;
  r.get_file(opt, opt_path.string());
  ck.optimizer = io::load_tensors(opt_path.string());
  if (r.has(kValueHeadFile)) {
    fs::path vh = fs::path(scratch_dir) / kValueHeadFile;
    r.get_file(kValueHeadFile, vh.string());
    ck.value_head = io::load_tensors(vh.string());
  }
  MOERL_LOG(INFO) << "checkpoint: rank " << dp.rank() << " loaded " << where << " (rl step " << ck.state.rl_step
                  << ", sft step " << ck.state.sft_step << ")";
  return ck;
}

}  // namespace moerl::train
