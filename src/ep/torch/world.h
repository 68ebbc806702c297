// Rendezvous for multi-rank EP groups: one c10d TCPStore per process (rank 0 serves it)
// at MASTER_ADDR:MASTER_PORT, and a fresh key prefix per group so several groups (e.g.
// fabric and alltoall in one benchmark) share it. Not thread-safe; call from one thread.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <string>

namespace moerl::ep::detail {

struct World {
  c10::intrusive_ptr<c10d::Store> store;  // prefixed for this group
  int rank = 0;
  int world_size = 1;
};

// Collective: every rank calls it once per group, in the same order.
World join_world(const std::string& group_kind, double timeout_s);

}  // namespace moerl::ep::detail
