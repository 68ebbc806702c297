// Rendezvous for multi-rank EP groups: one c10d TCPStore per process (rank 0 serves it)
// at MASTER_ADDR:MASTER_PORT, and a fresh key prefix per group so several groups (e.g.
// fabric and alltoall in one benchmark) share it. Not thread-safe; call from one thread.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <memory>
#include <string>

#include "ep/ep.h"

namespace moerl::ep::detail {

struct World {
  c10::intrusive_ptr<c10d::Store> store;  // prefixed for this group
  int rank = 0;
  int world_size = 1;
};

// Collective: every rank calls it once per group, in the same order.
World join_world(const std::string& group_kind, double timeout_s);
// A sub-world of `parent` (e.g. the ranks of one node): this rank is `rank` of `world_size`
// there; its keys live under `name`, which every member must pass alike and no other
// sub-world may share. No communication.
World sub_world(const World& parent, const std::string& name, int rank, int world_size);

// Builds a backend's Group over an already joined world (the members of a hierarchical
// group's hops). Collective within `world`. fabric and alltoall are built in; GPU backends
// register theirs (register_world_backend, beside register_backend).
using WorldGroupFactory = std::shared_ptr<Group> (*)(const Config& cfg, int64_t num_experts, const World& world);
void register_world_backend(Backend b, WorldGroupFactory factory);
std::shared_ptr<Group> make_group_in(const Config& cfg, int64_t num_experts, const World& world);
bool has_world_backend(Backend b);

// The factory of a multi-rank backend: joins the launch's ranks, checks the config against
// the world size, builds Backend(cfg, num_experts, world). Collective, like join_world.
template <typename Backend>
std::shared_ptr<Backend> make_world_group(const std::string& group_kind, const Config& cfg, int64_t num_experts) {
  World w = join_world(group_kind, cfg.timeout_s);
  cfg.validate(num_experts, w.world_size);
  return std::make_shared<Backend>(cfg, num_experts, w);
}

}  // namespace moerl::ep::detail
