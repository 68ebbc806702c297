// The node structure of a hierarchical EP group and the routing split its two hops use.
// A node is LOCAL_WORLD_SIZE consecutive ranks (rank r is on node r / L, local index r % L),
// so the experts of node m are the contiguous block [m*E/N, (m+1)*E/N). Pure functions of
// their inputs; tensor helpers run on the tensors' device.
//
//   NodeTopology t = NodeTopology::make(rank, world_size, env::local_world_size());
//   SplitRouting s = split_routing(topk_idx_TK, t.experts_per_node(E), t.node);
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>

namespace moerl::ep::hier {

struct NodeTopology {
  int world_size = 1;
  int local_world_size = 1;  // L: ranks per node
  int num_nodes = 1;         // N = world_size / L
  int node = 0;              // rank / L
  int local = 0;             // rank % L: this rank's index on its node, and its inter-node group
  int64_t experts_per_node(int64_t num_experts) const { return num_experts / num_nodes; }

  // local_world_size: LOCAL_WORLD_SIZE; nullopt (unset) = one node of every rank. Throws
  // moerl::Error naming LOCAL_WORLD_SIZE unless it is in [1, world_size] and divides it.
  static NodeTopology make(int rank, int world_size, std::optional<long> local_world_size);
};

struct SplitRouting {
  at::Tensor remote_idx_TK;  // int64: global ids of experts on other nodes, else -1 (the inter hop)
  at::Tensor local_idx_TK;   // int64: node-local ids [0, E/N) of experts on `node`, else -1 (intra hop)
};
SplitRouting split_routing(const at::Tensor& topk_idx_TK, int64_t experts_per_node, int node);

// Sum over tokens of the number of distinct groups (expert e is in group e / group_size)
// among a token's experts, -1 entries ignored. On remote_idx_TK: with experts per node,
// the rows the inter-node hop sends (per-node deduplication); with experts per rank, the
// rows a flat one-hop dispatch would send to other nodes' ranks.
int64_t count_distinct_groups(const at::Tensor& topk_idx_TK, int64_t group_size);

}  // namespace moerl::ep::hier
