// Which tensors are routed experts, from their Hugging Face names alone: the per-expert hub
// layout every architecture here loads and saves ("...mlp.experts.<e>.gate_proj.weight",
// Mixtral's "...block_sparse_moe.experts.<e>.w1.weight"). Shared experts ("shared_experts.",
// "shared_expert.") and routers are dense. What an expert-parallel rank shards, publishes
// and loads is decided here, for every part that moves weights.
//
//   routed_expert_index("model.layers.3.mlp.experts.17.up_proj.weight")  -> 17
//   routed_expert_index("model.layers.3.mlp.shared_experts.up_proj.weight") -> nullopt
// Pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace moerl::model {

// The routed expert a tensor belongs to, or nullopt for a dense tensor.
inline std::optional<int64_t> routed_expert_index(std::string_view name) {
  constexpr std::string_view kExperts = ".experts.";
  const size_t at = name.find(kExperts);
  if (at == std::string_view::npos) return std::nullopt;
  size_t i = at + kExperts.size();
  int64_t e = 0;
  const size_t first = i;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) e = e * 10 + (name[i] - '0');
  if (i == first || i >= name.size() || name[i] != '.') return std::nullopt;
  return e;
}

inline bool is_routed_expert(std::string_view name) { return routed_expert_index(name).has_value(); }

}  // namespace moerl::model
