// Writing one rank's shard of a sharded Hugging Face checkpoint, its index and config.
#include "model/sharded_files.h"

#include <cstdio>
#include <filesystem>

#include "io/tensor_io.h"
#include "model/expert_names.h"

namespace moerl::model {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* dtype_json_name(at::ScalarType t) {
  switch (t) {
    case at::kBFloat16: return "bfloat16";
    case at::kHalf: return "float16";
    default: return "float32";
  }
}

}  // namespace

std::string shard_file_name(const std::string& stem, int rank, int world) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "-%05d-of-%05d.safetensors", rank + 1, world);
  return stem + buf;
}

std::map<std::string, at::Tensor> shard_tensors(const Model& model, int rank) {
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, t] : model.state()) {  // buffers (dense) with rank 0's tensors
    if (rank != 0 && !is_routed_expert(name)) continue;
    at::Tensor v = t.detach();
    if (v.scalar_type() == at::kDouble) v = v.to(at::kFloat);  // safetensors in moerl: no f64
    out[name] = v.cpu().contiguous();
  }
  return out;
}

json write_model_shard(const Model& model, int rank, int world, const std::string& dir) {
  std::map<std::string, at::Tensor> tensors = shard_tensors(model, rank);
  const std::string file = shard_file_name("model", rank, world);
  fs::create_directories(dir);
  io::save_tensors((fs::path(dir) / file).string(), tensors);
  json names = json::array();
  int64_t bytes = 0;
  for (const auto& [name, t] : tensors) {
    names.push_back(name);
    bytes += t.numel() * static_cast<int64_t>(t.element_size());
  }
  return {{"file", file}, {"names", names}, {"bytes", bytes}};
}

std::string shard_index_json(const std::vector<json>& descriptions) {
  json weight_map = json::object();
  int64_t total = 0;
  for (const json& d : descriptions) {
    for (const auto& n : d.at("names")) weight_map[n.get<std::string>()] = d.at("file");
    total += d.at("bytes").get<int64_t>();
  }
  return json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2) + "\n";
}

void write_model_config(const Model& model, const std::string& dir) {
  io::HfConfig c = model.config();
  c.torch_dtype = dtype_json_name(model.dtype());
  fs::create_directories(dir);
  c.save((fs::path(dir) / "config.json").string());
}

}  // namespace moerl::model
