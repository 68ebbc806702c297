// at::Tensor <-> safetensors: single files, model.safetensors directories and sharded
// checkpoints (model.safetensors.index.json), in the names and layout transformers uses.

#include "io/tensor_io.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/files.h"

namespace moerl::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kSingleName[] = "model.safetensors";
constexpr char kIndexName[] = "model.safetensors.index.json";

std::string shape_str(at::IntArrayRef shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// model-DDDDD-of-DDDDD.safetensors, the transformers shard naming.
bool is_shard_name(const std::string& f) {
  static const std::string kPattern = "model-#####-of-#####.safetensors";
  if (f.size() != kPattern.size()) return false;
  for (size_t i = 0; i < f.size(); ++i) {
    if (kPattern[i] == '#' ? !std::isdigit(static_cast<unsigned char>(f[i])) : f[i] != kPattern[i]) {
      return false;
    }
  }
  return true;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void load_file_into(const SafetensorsFile& file, std::map<std::string, at::Tensor>& out) {
  for (const std::string& name : file.names()) {
    if (out.count(name) != 0) {
      throw Error(file.source_name() + ": tensor '" + name + "' also appears in another shard",
                  "each tensor must live in exactly one shard; re-save the checkpoint");
    }
    out.emplace(name, to_tensor(file, name));
  }
}

std::map<std::string, at::Tensor> load_sharded(const fs::path& dir) {
  const std::string index_path = (dir / kIndexName).string();
  std::ifstream in(index_path, std::ios::binary);
  if (!in) {
    throw Error("cannot read '" + index_path + "'", "check file permissions", ErrorCode::kIo);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  json index;
  try {
    index = json::parse(ss.str());
  } catch (const json::exception& e) {
    throw Error(index_path + ": not valid JSON (" + e.what() + ")",
                "the index is the JSON transformers writes beside sharded weights");
  }
  auto wm = index.is_object() ? index.find("weight_map") : index.end();
  if (!index.is_object() || wm == index.end() || !wm->is_object()) {
    throw Error(index_path + ": expected an object with a \"weight_map\" object",
                "the index maps each tensor name to its shard file, e.g. "
                "{\"weight_map\": {\"lm_head.weight\": \"model-00001-of-00002.safetensors\"}}");
  }
  // shard file -> tensors the index places there
  std::map<std::string, std::vector<std::string>> by_shard;
  for (const auto& [name, file] : wm->items()) {
    if (!file.is_string()) {
      throw Error(index_path + ": weight_map['" + name + "'] must be a file name string",
                  "re-save the checkpoint");
    }
    std::string shard = file.get<std::string>();
    fs::path rel(shard);
    if (shard.empty() || rel.is_absolute() ||
        std::any_of(rel.begin(), rel.end(), [](const fs::path& p) { return p == ".."; })) {
      throw Error(index_path + ": weight_map['" + name + "'] = '" + shard +
                      "' is not a file inside the checkpoint directory",
                  "shard names are relative, like model-00001-of-00002.safetensors");
    }
    by_shard[shard].push_back(name);
  }
  std::map<std::string, at::Tensor> out;
  for (const auto& [shard, names] : by_shard) {
    const std::string shard_path = (dir / shard).string();
    if (!fs::exists(shard_path)) {
      throw Error(index_path + " lists shard '" + shard + "' (for tensor '" + names.front() +
                      "'), but " + shard_path + " does not exist",
                  "the checkpoint is incomplete; download or copy every shard",
                  ErrorCode::kNotFound);
    }
    SafetensorsFile file = SafetensorsFile::open(shard_path);
    // NOTE: the index decides what the checkpoint holds, as in transformers: a shard's tensors
    // that the index does not list are not loaded (an expert-parallel rank's partial copy of a
    // sharded version lists only its own tensors; rollout/weight_publisher.h).
    for (const std::string& name : names) {
      if (!file.contains(name)) {
        throw Error(index_path + " places tensor '" + name + "' in " + shard +
                        ", but that shard has no such tensor",
                    "the index and shards disagree; re-download or re-save the checkpoint",
                    ErrorCode::kNotFound);
      }
      out.emplace(name, to_tensor(file, name));
    }
  }
  return out;
}

// Contiguous CPU copies (no copy when already so) kept alive while a writer points at them.
struct Prepared {
  std::string name;
  at::Tensor tensor;
  DType dtype;
  size_t nbytes;
};

void write_group(const std::string& path, const std::vector<const Prepared*>& group) {
  SafetensorsWriter w;
  for (const Prepared* p : group) {
    w.add(p->name, p->dtype, p->tensor.sizes().vec(), p->tensor.data_ptr(), p->nbytes);
  }
  w.write(path, {{"format", "pt"}});
}

}  // namespace

at::ScalarType scalar_type_of(DType dtype) {
  switch (dtype) {
    case DType::kF32: return at::kFloat;
    case DType::kBF16: return at::kBFloat16;
    case DType::kF16: return at::kHalf;
    case DType::kI64: return at::kLong;
    case DType::kI32: return at::kInt;
    case DType::kU8: return at::kByte;
    case DType::kBool: return at::kBool;
  }
  throw Error("unknown DType value", "this is a bug in moerl", ErrorCode::kInternal);
}

DType dtype_of(at::ScalarType type, const std::string& tensor_name) {
  switch (type) {
    case at::kFloat: return DType::kF32;
    case at::kBFloat16: return DType::kBF16;
    case at::kHalf: return DType::kF16;
    case at::kLong: return DType::kI64;
    case at::kInt: return DType::kI32;
    case at::kByte: return DType::kU8;
    case at::kBool: return DType::kBool;
    default: break;
  }
  throw Error("tensor '" + tensor_name + "' has dtype " + std::string(c10::toString(type)) +
                  ", which moerl does not store in safetensors",
              "convert it first (float32, bfloat16, float16, int64, int32, uint8 or bool)");
}

at::Tensor to_tensor(const SafetensorsFile& file, const std::string& name) {
  const TensorInfo& info = file.info(name);
  at::Tensor t = at::empty(info.shape, at::TensorOptions().dtype(scalar_type_of(info.dtype)));
  // NOTE: the single copy: mapped pages -> owned tensor storage.
  if (info.nbytes > 0) std::memcpy(t.data_ptr(), info.data, info.nbytes);
  return t;
}

std::map<std::string, at::Tensor> load_tensors(const std::string& path_or_dir) {
  std::error_code ec;
  const fs::path p(path_or_dir);
  if (fs::is_directory(p, ec)) {
    if (fs::exists(p / kIndexName)) return load_sharded(p);
    if (fs::exists(p / kSingleName)) {
      std::map<std::string, at::Tensor> out;
      load_file_into(SafetensorsFile::open((p / kSingleName).string()), out);
      return out;
    }
    throw Error("checkpoint directory '" + path_or_dir + "' has neither " + kSingleName +
                    " nor " + kIndexName,
                "pass a directory written by save_pretrained / `moerl` or a .safetensors file",
                ErrorCode::kNotFound);
  }
  if (!fs::exists(p, ec)) {
    throw Error("checkpoint path '" + path_or_dir + "' does not exist",
                "pass a .safetensors file or a checkpoint directory", ErrorCode::kNotFound);
  }
  std::map<std::string, at::Tensor> out;
  load_file_into(SafetensorsFile::open(path_or_dir), out);
  return out;
}

void save_tensors(const std::string& dir_or_file, const std::map<std::string, at::Tensor>& tensors,
                  int64_t max_shard_bytes) {
  std::vector<Prepared> prepared;
  prepared.reserve(tensors.size());
  size_t total = 0;
  for (const auto& [name, t] : tensors) {
    if (!t.defined()) {
      throw Error("save_tensors: tensor '" + name + "' is undefined",
                  "pass only defined tensors");
    }
    DType dt = dtype_of(t.scalar_type(), name);
    at::Tensor c = t.detach().to(at::kCPU).contiguous();
    size_t nbytes = static_cast<size_t>(c.numel()) * dtype_size(dt);
    prepared.push_back({name, c, dt, nbytes});
    total += nbytes;
  }
  std::vector<const Prepared*> all;
  for (const Prepared& p : prepared) all.push_back(&p);

  if (ends_with(dir_or_file, ".safetensors")) {
    write_group(dir_or_file, all);
    return;
  }
  const fs::path dir(dir_or_file);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    throw Error("cannot create checkpoint directory '" + dir_or_file + "': " + ec.message(),
                "check the path and permissions", ErrorCode::kIo);
  }
  const fs::path index_path = dir / kIndexName;
  if (max_shard_bytes <= 0 || total <= static_cast<size_t>(max_shard_bytes)) {
    write_group((dir / kSingleName).string(), all);
    fs::remove(index_path, ec);  // a stale index would shadow the new single file
    return;
  }
  // Greedy in name order; a tensor larger than the limit gets a shard of its own.
  std::vector<std::vector<const Prepared*>> shards(1);
  size_t current = 0;
  for (const Prepared* p : all) {
    if (!shards.back().empty() && current + p->nbytes > static_cast<size_t>(max_shard_bytes)) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(p);
    current += p->nbytes;
  }
  fs::remove(index_path, ec);  // readers never see a new index over half-written shards
  const size_t n = shards.size();
  json weight_map = json::object();
  std::set<std::string> written;
  for (size_t i = 0; i < n; ++i) {
    char fname[64];
    std::snprintf(fname, sizeof(fname), "model-%05zu-of-%05zu.safetensors", i + 1, n);
    write_group((dir / fname).string(), shards[i]);
    written.insert(fname);
    for (const Prepared* p : shards[i]) weight_map[p->name] = fname;
  }
  json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  write_file_atomic(index_path.string(), index.dump(2) + "\n");
  // Remove what an earlier save left that the new index does not reference.
  fs::remove(dir / kSingleName, ec);
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string fname = entry.path().filename().string();
    if (is_shard_name(fname) && written.count(fname) == 0) {
      fs::remove(entry.path(), ec);
    }
  }
}

at::Tensor require_tensor(const std::map<std::string, at::Tensor>& tensors, const std::string& name,
                          const std::vector<int64_t>& expected_shape) {
  auto it = tensors.find(name);
  if (it == tensors.end()) {
    // Neighbours in sorted order share the longest prefix: likely what was meant.
    std::string near;
    auto lo = tensors.lower_bound(name);
    auto start = lo;
    for (int k = 0; k < 2 && start != tensors.begin(); ++k) --start;
    int shown = 0;
    for (auto j = start; j != tensors.end() && shown < 4; ++j, ++shown) {
      near += (shown ? ", " : "") + j->first;
    }
    throw Error("checkpoint has no tensor '" + name + "' (" + std::to_string(tensors.size()) +
                    " tensors" + (near.empty() ? "" : "; nearby names: " + near) + ")",
                "the weights do not match config.json's architecture (model_type, "
                "num_hidden_layers, mlp_only_layers, tie_word_embeddings)",
                ErrorCode::kNotFound);
  }
  const at::Tensor& t = it->second;
  if (t.sizes() != at::IntArrayRef(expected_shape)) {
    throw Error("tensor '" + name + "' has shape " + shape_str(t.sizes()) + ", expected " +
                    shape_str(expected_shape),
                "the weights do not match config.json (check hidden_size, intermediate_size, "
                "num_experts, num_attention_heads, num_key_value_heads, head_dim, vocab_size)");
  }
  return t;
}

}  // namespace moerl::io
