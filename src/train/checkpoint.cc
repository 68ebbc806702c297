#include "train/checkpoint.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "base/files.h"
#include "base/error.h"
#include "base/log.h"
#include "io/tensor_io.h"
#include "store/commit.h"
#include "train/reward_model.h"

namespace moerl::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* kStateFile = "trainer_state.json";
constexpr const char* kOptimizerFile = "optimizer.safetensors";

std::string step_name(const TrainerState& s) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "step-%08lld-sft-%06lld", static_cast<long long>(s.rl_step),
                static_cast<long long>(s.sft_step));
  return buf;
}


}  // namespace

nlohmann::json TrainerState::to_json() const {
  return {{"magic", "moerl-trainer-state"},
          {"version", kCheckpointStateVersion},
          {"rl_step", rl_step},
          {"sft_step", sft_step},
          {"cursor", cursor},
          {"policy_version", policy_version},
          {"extra", extra}};
}

TrainerState TrainerState::from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object() || j.value("magic", "") != "moerl-trainer-state") {
    throw Error(where + ": not a moerl trainer state", "the checkpoint is corrupt or from another tool",
                ErrorCode::kIo);
  }
  int version = j.value("version", -1);
  if (version != kCheckpointStateVersion) {
    throw Error(where + ": trainer state version " + std::to_string(version) + " is not supported (this build reads " +
                    std::to_string(kCheckpointStateVersion) + ")",
                "resume with the moerl version that wrote it", ErrorCode::kIo);
  }
  TrainerState s;
  try {
    s.rl_step = j.at("rl_step").get<int64_t>();
    s.sft_step = j.at("sft_step").get<int64_t>();
    s.cursor = j.at("cursor").get<uint64_t>();
    s.policy_version = j.at("policy_version").get<uint64_t>();
    s.extra = j.value("extra", nlohmann::json::object());
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + ": trainer state is missing a field (" + e.what() + ")", "the checkpoint is corrupt",
                ErrorCode::kIo);
  }
  return s;
}

std::set<std::string> TrainerState::pinned_commits() const {
  std::set<std::string> out;
  auto it = extra.find("reference");
  if (it != extra.end() && it->is_string()) out.insert(it->get<std::string>());
  return out;
}

std::string fetch_commit_model(store::CommitReader& r, const std::string& scratch_dir) {
  fs::path dir = fs::path(scratch_dir) / "model";
  remove_tree(dir.string());
  fs::create_directories(dir);
  for (const std::string& name : r.names()) {
    if (name.rfind("model/", 0) == 0) r.get_file(name, (fs::path(scratch_dir) / name).string());
  }
  return dir.string();
}

std::string checkpoint_prefix(store::ObjectStore& store, const std::string& root, const TrainerState& state) {
  // "step-...-sft-000150.2" sorts after "step-...-sft-000150".
  std::string name = step_name(state);
  for (int n = 2; store.head(root + "/" + name + "/" + store::kManifestName); ++n) {
    name = step_name(state) + "." + std::to_string(n);
  }
  return root + "/" + name;
}

std::string save_checkpoint(store::ObjectStore& store, const std::string& root, const TrainerState& state,
                            const model::Model& policy, const model::Tokenizer& tokenizer,
                            PolicyTrainer& trainer, int64_t keep) {
  ScratchDir tmp("moerl-ckpt");
  fs::path model_dir = fs::path(tmp.path()) / "model";
  fs::create_directories(model_dir);
  policy.save(model_dir.string());
  tokenizer.save(model_dir.string());
  store::CommitWriter w(store, checkpoint_prefix(store, root, state));
  for (const auto& e : fs::directory_iterator(model_dir)) {
    w.put_file("model/" + e.path().filename().string(), e.path().string());
  }
  fs::path opt = fs::path(tmp.path()) / kOptimizerFile;
  io::save_tensors(opt.string(), trainer.optimizer().state());
  w.put_file(kOptimizerFile, opt.string());
  if (trainer.config().loss.uses_critic()) {
    fs::path vh = fs::path(tmp.path()) / kValueHeadFile;
    io::save_tensors(vh.string(), trainer.value_head());
    w.put_file(kValueHeadFile, vh.string());
  }
  w.put_bytes(kStateFile, state.to_json().dump(2));
  w.commit({{"rl_step", state.rl_step}, {"sft_step", state.sft_step}});
  store::retain_latest(store, root, static_cast<size_t>(std::max<int64_t>(1, keep)), state.pinned_commits());
  return w.prefix();
}

namespace {

LoadedCheckpoint load_commit(store::CommitReader& r, store::ObjectStore& store, const std::string& scratch_dir) {
  LoadedCheckpoint ck;
  ck.prefix = r.prefix();
  std::string where = store.uri() + "/" + ck.prefix;
  ck.state = TrainerState::from_json(nlohmann::json::parse(r.get_bytes(kStateFile), nullptr, false), where);
  ck.model_dir = fetch_commit_model(r, scratch_dir);
  fs::path opt = fs::path(scratch_dir) / kOptimizerFile;
  r.get_file(kOptimizerFile, opt.string());
  ck.optimizer = io::load_tensors(opt.string());
  if (r.has(kValueHeadFile)) {
    fs::path vh = fs::path(scratch_dir) / kValueHeadFile;
    r.get_file(kValueHeadFile, vh.string());
    ck.value_head = io::load_tensors(vh.string());
  }
  MOERL_LOG(INFO) << "checkpoint: loaded " << where << " (rl step " << ck.state.rl_step << ", sft step "
                  << ck.state.sft_step << ")";
  return ck;
}

}  // namespace

std::optional<LoadedCheckpoint> load_latest_checkpoint(store::ObjectStore& store, const std::string& root,
                                                       const std::string& scratch_dir) {
  std::optional<store::CommitReader> newest;
  std::string damaged;  // the first damaged commit, for the warning and the final error
  try {
    newest = store::CommitReader::latest(store, root);
  } catch (const store::DamagedCommit& e) {
    damaged = e.what();
  }
  if (newest) {
    try {
      return load_commit(*newest, store, scratch_dir);
    } catch (const store::DamagedCommit& e) {
      damaged = e.what();
    }
  }
  // A damaged newest commit: the previous complete one, newest first (names sort by step).
  const std::vector<std::string> commits = store::list_commits(store, root);
  for (auto it = commits.rbegin(); it != commits.rend(); ++it) {
    if (newest && *it >= newest->prefix()) continue;
    try {
      store::CommitReader r = store::CommitReader::open(store, *it);
      LoadedCheckpoint ck = load_commit(r, store, scratch_dir);
      MOERL_LOG(WARN) << "checkpoint: the newest checkpoint is damaged (" << damaged << "); resumed from the previous "
                      << "complete one, " << store.uri() << "/" << *it
                      << " (HINT: the damaged commit stays for inspection; `moerl store cleanup` removes it)";
      return ck;
    } catch (const store::DamagedCommit& e) {
      MOERL_LOG(WARN) << "checkpoint: " << store.uri() << "/" << *it << " is damaged too (" << e.what() << ")";
    }
  }
  if (!damaged.empty()) {
    throw Error("checkpoint: every checkpoint under " + store.uri() + "/" + root + " is damaged; the newest: " + damaged,
                "restore the store from a backup, or start a fresh run (--fresh)", ErrorCode::kIo);
  }
  return std::nullopt;
}

void restore(const LoadedCheckpoint& ck, model::Model& policy, PolicyTrainer& trainer) {
  policy.load_weights(io::load_tensors(ck.model_dir));
  trainer.optimizer().load_state(ck.optimizer);
  if (trainer.config().loss.uses_critic()) {
    if (ck.value_head.empty()) {
      throw Error("checkpoint " + ck.prefix + " has no critic (value head) but algorithm needs one",
                  "resume with the algorithm the run started with");
    }
    trainer.load_value_head(ck.value_head);
  }
  trainer.set_step(ck.state.rl_step);
}

}  // namespace moerl::train
