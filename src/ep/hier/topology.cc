// NodeTopology validation and the routing split of the hierarchical group.
#include "ep/hier/topology.h"

#include <string>

#include "base/error.h"

namespace moerl::ep::hier {

NodeTopology NodeTopology::make(int rank, int world_size, std::optional<long> local_world_size) {
  const long L = local_world_size.value_or(world_size);
  if (L < 1 || L > world_size || world_size % L != 0) {
    throw Error("ep hierarchical: LOCAL_WORLD_SIZE=" + std::to_string(L) + " must divide WORLD_SIZE=" +
                    std::to_string(world_size) + " (nodes of LOCAL_WORLD_SIZE ranks each)",
                "set LOCAL_WORLD_SIZE to the ranks per node (`moerl launch --nproc-per-node G` sets it), "
                "e.g. LOCAL_WORLD_SIZE=2 for 4 ranks as 2 nodes of 2");
  }
  NodeTopology t;
  t.world_size = world_size;
  t.local_world_size = static_cast<int>(L);
  t.num_nodes = world_size / t.local_world_size;
  t.node = rank / t.local_world_size;
  t.local = rank % t.local_world_size;
  return t;
}

SplitRouting split_routing(const at::Tensor& topk_idx_TK, int64_t experts_per_node, int node) {
  const at::Tensor valid = topk_idx_TK.ge(0);
  const at::Tensor here = valid & topk_idx_TK.div(experts_per_node, "floor").eq(node);
  const at::Tensor none = at::full_like(topk_idx_TK, -1);
  SplitRouting s;
  s.remote_idx_TK = at::where(valid & here.logical_not(), topk_idx_TK, none);
  s.local_idx_TK = at::where(here, topk_idx_TK - experts_per_node * node, none);
  return s;
}

int64_t count_distinct_groups(const at::Tensor& topk_idx_TK, int64_t group_size) {
  if (topk_idx_TK.numel() == 0) return 0;
  at::Tensor g = at::where(topk_idx_TK.ge(0), topk_idx_TK.div(group_size, "floor"), at::full_like(topk_idx_TK, -1));
  g = std::get<0>(g.sort(1));
  at::Tensor distinct = g.ge(0);
  const int64_t K = g.size(1);
  if (K > 1) distinct.narrow(1, 1, K - 1) &= g.narrow(1, 1, K - 1).ne(g.narrow(1, 0, K - 1));
  return distinct.sum().item<int64_t>();
}

}  // namespace moerl::ep::hier
