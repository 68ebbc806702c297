// Checkpoints and model dirs of an expert-parallel job (R ranks, each holding 1/R of the
// experts): rank r writes its experts as shard model-<r+1>-of-<R>.safetensors (rank 0's
// shard also holds the dense tensors), rank 0 writes config.json, the tokenizer and
// model.safetensors.index.json mapping every tensor to its shard, so the result is ONE
// Hugging Face sharded checkpoint that a single-rank load_model reads whole and an EP rank
// reads its slice of. Spec: docs/formats/checkpoint.md (the EP variant).
//
//   save_sharded_model("runs/x/final_model", policy, tok, *dp);   // collective, shared dir
//   save_ep_checkpoint(*store, "ckpt", state, policy, tok, trainer, keep, *dp);   // collective
//   if (auto ck = load_ep_checkpoint(*store, "ckpt", scratch, *dp)) restore(*ck, policy, trainer);
//
// Checkpoint commit: rank 0 names the commit; every rank puts its model shard and its optimizer
// state under it in parallel (no manifest yet, so readers and retain_latest ignore them), and
// rank 0 adopts the others' entries (store::CommitWriter::adopt), adds the index, config,
// tokenizer and state, and writes the manifest last; every rank returns once it is committed
// (or with rank 0's error). Optimizer state is per rank (optimizer-rank-<r+1>-of-<R>.safetensors);
// resuming needs the same ep size.
// Not thread-safe. Failures: moerl::Error; a failure before the manifest leaves no commit.
#pragma once

#include <optional>
#include <string>

#include "model/model.h"
#include "model/tokenizer.h"
#include "store/object_store.h"
#include "train/checkpoint.h"
#include "train/dp_sync.h"
#include "train/policy_trainer.h"

namespace moerl::train {

// Writes the sharded model (config, tokenizer, index, one shard per rank) into `dir`, which
// every rank must see (one machine under `moerl launch`). Collective.
void save_sharded_model(const std::string& dir, const model::Model& policy, const model::Tokenizer& tok,
                        DataParallel& dp);

// save_checkpoint (train/checkpoint.h) for R ranks. Collective; returns the commit prefix.
std::string save_ep_checkpoint(store::ObjectStore& store, const std::string& root, const TrainerState& state,
                               const model::Model& policy, const model::Tokenizer& tok, PolicyTrainer& trainer,
                               int64_t keep, DataParallel& dp);

// The newest commit under ROOT fetched into scratch_dir (per rank), with this rank's
// optimizer state; nullopt if none. restore() (train/checkpoint.h) then applies it.
std::optional<LoadedCheckpoint> load_ep_checkpoint(store::ObjectStore& store, const std::string& root,
                                                   const std::string& scratch_dir, DataParallel& dp);

}  // namespace moerl::train
