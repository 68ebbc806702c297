// Trainer checkpoints through the object store's commit protocol: the policy in HF layout
// (config.json + model.safetensors + tokenizer), the optimizer state, the critic head and
// a JSON trainer state (step, phase, data cursor, seeds, evaluation so far, runtime state),
// written shard by shard with the manifest last (store/commit.h). A reader sees a whole
// checkpoint or none. Spec: docs/formats/checkpoint.md.
//
//   save_checkpoint(*store, "ckpt", state, policy, tokenizer, trainer);   // ckpt/step-00000040
//   if (auto ck = load_latest_checkpoint(*store, "ckpt", scratch_dir)) {
//     policy.load_weights(ck->weights); trainer.optimizer().load_state(ck->optimizer); ...
//   }
// Failure: moerl::Error naming the checkpoint and what is wrong; nothing partial is used.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <set>
#include <string>

#include "model/model.h"
#include "model/tokenizer.h"
#include "store/object_store.h"
#include "train/policy_trainer.h"

namespace moerl::store {
class CommitReader;
}

namespace moerl::train {

inline constexpr int kCheckpointStateVersion = 1;

struct TrainerState {
  int64_t rl_step = 0;      // RL steps completed
  int64_t sft_step = 0;     // SFT steps completed
  uint64_t cursor = 0;      // next train item index of the task
  uint64_t policy_version = 0;
  nlohmann::json extra = nlohmann::json::object();  // eval results, accounting, runtime state

  nlohmann::json to_json() const;
  static TrainerState from_json(const nlohmann::json& j, const std::string& where);
  // Commits this state depends on, kept by retention: the KL reference's checkpoint
  // (extra["reference"], a commit prefix).
  std::set<std::string> pinned_commits() const;
};

// "ROOT/step-<rl_step>-sft-<sft_step>", or with the next free suffix ".2", ".3", ... when a
// commit at those steps exists already (an async run whose RL phase trained nothing after the
// SFT checkpoint): where the checkpoint of `state` is committed.
std::string checkpoint_prefix(store::ObjectStore& store, const std::string& root, const TrainerState& state);

// Commits "ROOT/step-<rl_step>-<sft_step>" and points ROOT/latest at it; keeps the newest
// `keep` checkpoints. Returns the commit prefix.
std::string save_checkpoint(store::ObjectStore& store, const std::string& root, const TrainerState& state,
                            const model::Model& policy, const model::Tokenizer& tokenizer,
                            PolicyTrainer& trainer, int64_t keep);

struct LoadedCheckpoint {
  std::string prefix;
  TrainerState state;
  std::string model_dir;  // local copy: config.json, model.safetensors, tokenizer
  std::map<std::string, at::Tensor> optimizer;
  std::map<std::string, at::Tensor> value_head;  // empty when the run had no critic
};

// The newest committed checkpoint under ROOT, fetched into scratch_dir; nullopt if none.
// A newest commit whose bytes fail their manifest (store::DamagedCommit) is skipped with a
// warning naming it, for the previous complete one; every commit damaged is an Error. A store
// that is down is an error as before, never a fallback.
std::optional<LoadedCheckpoint> load_latest_checkpoint(store::ObjectStore& store, const std::string& root,
                                                       const std::string& scratch_dir);

// Fetches the commit's "model/" files (a one-rank or a sharded HF model) into
// scratch_dir/model; returns that directory.
std::string fetch_commit_model(store::CommitReader& r, const std::string& scratch_dir);

// Restores policy weights, optimizer and critic of `ck` into a live trainer.
void restore(const LoadedCheckpoint& ck, model::Model& policy, PolicyTrainer& trainer);

}  // namespace moerl::train
