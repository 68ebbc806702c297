// The files of a Hugging Face sharded checkpoint written by the ranks of an expert-parallel
// group, each holding 1/R of the routed experts: rank r writes model-<r+1>-of-<R>.safetensors
// with its experts (rank 0's shard also holds every dense tensor), and one writer adds
// model.safetensors.index.json mapping every tensor to its shard, and config.json. A
// single-rank load_model reads the result whole; an EP rank reads its slice. Used by the
// trainer's checkpoints and final model (train/ep_checkpoint.h) and by published weight
// versions (rollout/weight_publisher.h).
//
//   ShardFile f = write_model_shard(policy, rank, world, dir);    // every rank
//   std::string index = shard_index_json(all_ranks_descriptions); // one rank
// Pure file writing; not thread-safe for one dir. Failures: moerl::Error (disk).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "model/model.h"

namespace moerl::model {

inline constexpr const char* kShardIndexFile = "model.safetensors.index.json";

// "model-00002-of-00004.safetensors" for stem "model", rank 1, world 4.
std::string shard_file_name(const std::string& stem, int rank, int world);

// This rank's tensors: its routed experts, plus every dense tensor (and buffer) on rank 0;
// on the host, contiguous, float64 stored as float32.
std::map<std::string, at::Tensor> shard_tensors(const Model& model, int rank);

// Writes this rank's shard into `dir`; returns its description for the index: {"file",
// "names", "bytes"}.
nlohmann::json write_model_shard(const Model& model, int rank, int world, const std::string& dir);

// model.safetensors.index.json from every rank's description (any order).
std::string shard_index_json(const std::vector<nlohmann::json>& descriptions);

// config.json of `model` with torch_dtype set to its parameters' dtype.
void write_model_config(const Model& model, const std::string& dir);

}  // namespace moerl::model
