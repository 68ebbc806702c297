// Constructors of the multi-rank Groups (used by ep::make_group). Collective: every rank
// calls the same constructor in the same order; they rendezvous through the TCPStore.
#pragma once

#include <memory>

#include "ep/ep.h"

namespace moerl::ep {

std::shared_ptr<Group> fabric_group(const Config& cfg, int64_t num_experts);
std::shared_ptr<Group> alltoall_group(const Config& cfg, int64_t num_experts);

}  // namespace moerl::ep
