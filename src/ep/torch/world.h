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

// The factory of a multi-rank backend: joins the launch's ranks, checks the config against
// the world size, builds Backend(cfg, num_experts, world). Collective, like join_world.
template <typename Backend>
std::shared_ptr<Backend> make_world_group(const std::string& group_kind, const Config& cfg, int64_t num_experts) {
  World w = join_world(group_kind, cfg.timeout_s);
  cfg.validate(num_experts, w.world_size);
  return std::make_shared<Backend>(cfg, num_experts, w);
}

}  // namespace moerl::ep::detail
