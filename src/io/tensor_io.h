// Bridge between safetensors files and at::Tensor: load a file, a directory or a sharded
// checkpoint into named tensors, save named tensors in the Hugging Face layout.
// Each tensor is copied exactly once: from the mapped file into its owned at::Tensor.
//
//   auto weights = load_tensors("ckpt/");   // model.safetensors or model.safetensors.index.json
//   at::Tensor w = require_tensor(weights, "model.norm.weight", {hidden});
//   save_tensors("out/", weights, /*max_shard_bytes=*/5LL << 30);
//
// Failure: bad files, missing shards, missing tensors and wrong shapes are moerl::Error
// naming the file/tensor, the expected form and a HINT. Functions are thread-safe
// (no shared state) as long as callers do not write the same path concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "io/safetensors.h"

namespace moerl::io {

// kFloat, kBFloat16, kHalf, kLong, kInt, kByte, kBool <-> F32, BF16, F16, I64, I32, U8, BOOL.
at::ScalarType scalar_type_of(DType dtype);
// Error for a scalar type safetensors files in moerl do not carry (e.g. kDouble).
DType dtype_of(at::ScalarType type, const std::string& tensor_name);

// Copies tensor `name` out of the mapping into a new contiguous CPU tensor.
at::Tensor to_tensor(const SafetensorsFile& file, const std::string& name);

// `path_or_dir`: a .safetensors file; or a directory with model.safetensors.index.json
// (sharded: every shard opened once; every tensor the index lists must exist in its shard,
// and only those are loaded); or a directory with model.safetensors.
std::map<std::string, at::Tensor> load_tensors(const std::string& path_or_dir);

// `dir_or_file` ending in ".safetensors" is written as that one file. Otherwise it is a
// directory (created if needed): model.safetensors, or, when max_shard_bytes > 0 and the
// total exceeds it, model-00001-of-0000N.safetensors + model.safetensors.index.json
// (metadata.total_size, weight_map), named as transformers names them. Tensors are made
// contiguous on CPU; each file is written to a temp name and renamed into place.
void save_tensors(const std::string& dir_or_file, const std::map<std::string, at::Tensor>& tensors,
                  int64_t max_shard_bytes = 0);

// The tensor `name` from `tensors`, checked to have `expected_shape`. Error naming the
// tensor, the expected and actual shapes (or listing near names when missing) and a HINT.
at::Tensor require_tensor(const std::map<std::string, at::Tensor>& tensors, const std::string& name,
                          const std::vector<int64_t>& expected_shape);

}  // namespace moerl::io
