// The hierarchical EP group: DeepEP's internode scheme on moerl's existing transports.
// Ranks form nodes of LOCAL_WORLD_SIZE (ep/hier/topology.h). A token goes to another node
// once, over the inter-node group (the ranks with this rank's local index, one per node),
// however many of that node's experts it selected; the receiving rank forwards it over the
// intra-node group (its node's ranks) to the ranks holding those experts. Tokens for this
// node's experts take the intra-node group directly. Combine reverses both hops: the
// forwarder receives its node's partial sums, then one inter-node message goes back.
//
//   ep::Config cfg;  cfg.backend = ep::Backend::kHierarchical;   // hops: see Config
//   auto g = ep::make_group(cfg, E);          // collective; LOCAL_WORLD_SIZE gives the nodes
//   ep::hier::HierStats s = ep::hier::hier_stats(*g);   // inter-node rows sent so far
//
// Same contract as every Group (ep.h): received rows in source-rank order (normal) or
// expert-major (low_latency), so it is swappable with the flat backends. Both hops always
// run in normal mode (the inter hop must deduplicate per node); low-latency rows are a
// local re-layout of the received rows. Used by one thread at a time; errors of a hop
// surface as that hop's moerl::Error.
#pragma once

#include <cstdint>
#include <memory>

#include "ep/ep.h"
#include "ep/hier/topology.h"

namespace moerl::ep::hier {

// What this rank's dispatches (cached ones included) sent, cumulative since creation.
struct HierStats {
  int64_t dispatches = 0;
  int64_t inter_rows = 0;           // rows sent to other nodes: one per (token, destination node)
  int64_t inter_payload_bytes = 0;  // their x bytes (top-k metadata and headers not counted)
  int64_t flat_inter_rows = 0;      // what a flat one-hop dispatch of the same tokens would send
                                    // to other nodes: one row per (token, destination rank)
  int64_t forwarded_rows = 0;       // rows received from other nodes to forward on this node
};

// Collective over WORLD_SIZE ranks (TCPStore rendezvous, ep/torch/world.h). Throws
// moerl::Error naming LOCAL_WORLD_SIZE when it does not divide WORLD_SIZE.
std::shared_ptr<Group> hierarchical_group(const Config& cfg, int64_t num_experts);

// Counters and topology of a group made by hierarchical_group; throw for other backends.
HierStats hier_stats(const Group& g);
NodeTopology hier_topology(const Group& g);

}  // namespace moerl::ep::hier

namespace moerl::ep {
using hier::hierarchical_group;
}  // namespace moerl::ep
