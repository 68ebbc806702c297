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
#include "model/sharded_files.h"
#include "store/commit.h"
#include "train/reward_model.h"

namespace moerl::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kStateFile = "trainer_state.json";  // as train/checkpoint.cc

}  // namespace

void save_sharded_model(const std::string& dir, const model::Model& policy, const model::Tokenizer& tok,
                        DataParallel& dp) {
  const int r = dp.rank(), R = dp.world_size();
  json meta = model::write_model_shard(policy, r, R, dir);
  std::vector<std::string> metas = dp.gather(meta.dump());
  if (r == 0) {
    std::error_code ec;
    fs::remove(fs::path(dir) / "model.safetensors", ec);  // a stale one-rank model must not sit beside the index
    std::vector<json> descriptions;
    for (const std::string& m : metas) descriptions.push_back(json::parse(m));
    std::ofstream(fs::path(dir) / model::kShardIndexFile) << model::shard_index_json(descriptions);
    model::write_model_config(policy, dir);
    tok.save(dir);
  }
  dp.barrier("sharded model write");
}

std::string save_ep_checkpoint(store::ObjectStore& store, const std::string& root, const TrainerState& state,
                               const model::Model& policy, const model::Tokenizer& tok, PolicyTrainer& trainer,
                               int64_t keep, DataParallel& dp) {
  const int r = dp.rank(), R = dp.world_size();
  // Rank 0 names the commit (a second one at the same steps takes the next free suffix, as in
  // save_checkpoint); every rank then puts its own files under it, in parallel.
  const std::string prefix = dp.broadcast(r == 0 ? checkpoint_prefix(store, root, state) : std::string());
  ScratchDir tmp("moerl-epckpt");
  const fs::path scratch(tmp.path());
  store::CommitWriter w(store, prefix);
  json meta = model::write_model_shard(policy, r, R, (scratch / "model").string());
  const std::string shard = meta["file"].get<std::string>(), opt = model::shard_file_name("optimizer-rank", r, R);
  w.put_file("model/" + shard, (scratch / "model" / shard).string());
  io::save_tensors((scratch / opt).string(), trainer.optimizer().state());
  w.put_file(opt, (scratch / opt).string());
  json entries = json::array();
  for (const store::CommitEntry& e : w.entries()) entries.push_back(store::to_json(e));
  // NOTE: the gather doubles as "my files are uploaded".
  std::vector<std::string> parts = dp.gather(json{{"shard", meta}, {"entries", entries}}.dump());
  dp.lead_runs("checkpoint commit " + prefix, [&] {
    std::vector<json> descriptions;
    for (int s = 0; s < R; ++s) {
      json part = json::parse(parts[s]);
      descriptions.push_back(part["shard"]);
      if (s == 0) continue;
      for (const json& e : part["entries"]) w.adopt(store::commit_entry_from_json(e, "rank " + std::to_string(s)));
    }
    w.put_bytes(std::string("model/") + model::kShardIndexFile, model::shard_index_json(descriptions));
    fs::path cfg_dir = scratch / "cfg";
    model::write_model_config(policy, cfg_dir.string());
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
    store::retain_latest(store, root, static_cast<size_t>(std::max<int64_t>(1, keep)), state.pinned_commits());
    return std::string();
  });
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
  const std::string opt = model::shard_file_name("optimizer-rank", dp.rank(), dp.world_size());
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
