// Constructors of the multi-rank Groups (used by ep::make_group). Collective: every rank
// calls the same constructor in the same order; they rendezvous through the TCPStore.
#pragma once

#include <memory>

#include "ep/ep.h"
#include "ep/torch/world.h"

namespace moerl::ep {

std::shared_ptr<Group> fabric_group(const Config& cfg, int64_t num_experts);
std::shared_ptr<Group> alltoall_group(const Config& cfg, int64_t num_experts);
// The same over an already joined world (a sub-world of a hierarchical group).
std::shared_ptr<Group> fabric_group_in(const Config& cfg, int64_t num_experts, const detail::World& world);
std::shared_ptr<Group> alltoall_group_in(const Config& cfg, int64_t num_experts, const detail::World& world);

}  // namespace moerl::ep
