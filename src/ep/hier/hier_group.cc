// HierarchicalGroup: dispatch = one inter-node dispatch (per-node deduplicated) and one
// intra-node dispatch per source node; combine = the intra-node combines, then one
// inter-node combine. Both hops are ordinary Groups (fabric, alltoall, cuda_ipc, ...)
// built over sub-worlds of the rendezvous; this file only reshapes routing and rows.
//
// Why one intra dispatch per source node: the contract orders received rows by global
// source rank s = node * L + local. The intra dispatch for source node m delivers rows by
// intra source (local index), then token: exactly the rows of global sources m*L .. m*L+L-1
// in contract order, so concatenating the N results in node order is the contract's order
// with no extra metadata on the wire. (Cost: N intra rounds instead of one; see docs.)
#include "ep/hier/hier_group.h"

#include <utility>
#include <vector>

#include "base/env.h"
#include "base/error.h"
#include "ep/torch/routed.h"
#include "ep/torch/tensors.h"
#include "ep/torch/world.h"

namespace moerl::ep::hier {
namespace {

// The routing of one hierarchical dispatch; immutable once that dispatch returns.
struct HierState {
  Mode mode = Mode::kNormal;
  int64_t num_tokens = 0;
  bool has_inter = false;
  Handle inter;                        // the inter-node dispatch (valid iff has_inter)
  std::vector<int64_t> inter_offsets;  // [N+1] rows of the inter receive from each source node
  int64_t inter_rows_sent = 0;         // rows the inter dispatch sent to other nodes
  int64_t flat_rows = 0;               // rows a flat dispatch would send there (HierStats)
  std::vector<Handle> intra;           // [N] intra dispatch of source node m's tokens
  int64_t num_normal = 0;              // received rows in source order (sum over intra)
  at::Tensor ll_row;                   // low_latency: source-order row of each received row
  at::Tensor recv_topk_idx_NK, recv_topk_weights_NK;
  std::vector<int64_t> per_expert;
  int64_t num_recv() const { return mode == Mode::kNormal ? num_normal : ll_row.size(0); }
};

// Low-latency rows from source-order rows: for each local expert, the rows naming it (in
// source order), with only the top-k slots naming it set (ep.h's low-latency contract).
void make_low_latency(HierState& st, const at::Tensor& idx_NK, const at::Tensor& w_NK, int64_t El) {
  std::vector<at::Tensor> rows, idx, w;
  st.per_expert.assign(El, 0);
  for (int64_t e = 0; e < El; ++e) {
    const at::Tensor hit = idx_NK.eq(e);
    const at::Tensor r = hit.any(1).nonzero().select(1, 0);
    st.per_expert[e] = r.size(0);
    const at::Tensor h = hit.index_select(0, r);
    rows.push_back(r);
    idx.push_back(at::where(h, idx_NK.index_select(0, r), at::full_like(h, -1, at::kLong)));
    w.push_back(at::where(h, w_NK.index_select(0, r), at::zeros_like(h, w_NK.options())));
  }
  st.ll_row = at::cat(rows);
  st.recv_topk_idx_NK = at::cat(idx);
  st.recv_topk_weights_NK = at::cat(w);
}

class HierarchicalGroup final : public Group {
 public:
  HierarchicalGroup(const Config& cfg, int64_t num_experts, const detail::World& world, const NodeTopology& topo)
      : cfg_(cfg), num_experts_(num_experts), rank_(world.rank), topo_(topo),
        experts_per_node_(topo.experts_per_node(num_experts)) {
    // Both hops in normal mode: one row per (token, node) between nodes, per (row, rank) on one.
    Config intra = cfg;
    intra.mode = Mode::kNormal;
    intra.backend = cfg.intra_backend.value_or(detail::has_world_backend(Backend::kCudaIpc) ? Backend::kCudaIpc
                                                                                            : Backend::kFabric);
    intra.provider = cfg.intra_provider;
    Config inter = cfg;
    inter.mode = Mode::kNormal;
    inter.backend = cfg.inter_backend;
    // NOTE: not FI_PROVIDER: libfabric loads only the providers it lists, so with both hops
    // on fabric it must name both (FI_PROVIDER=shm,tcp) or be unset.
    inter.provider = !cfg.inter_provider.empty() ? cfg.inter_provider : !cfg.provider.empty() ? cfg.provider : "tcp";
    // Every rank builds intra then inter, so the collective constructors pair up.
    intra_ = topo.local_world_size == 1
                 ? loopback_group(experts_per_node_)
                 : detail::make_group_in(intra, experts_per_node_,
                                         detail::sub_world(world, "node" + std::to_string(topo.node) + "/", topo.local,
                                                           topo.local_world_size));
    if (topo.num_nodes > 1) {
      inter_ = detail::make_group_in(inter, num_experts,
                                     detail::sub_world(world, "local" + std::to_string(topo.local) + "/", topo.node,
                                                       topo.num_nodes));
    }
  }

  int rank() const override { return rank_; }
  int world_size() const override { return topo_.world_size; }
  int64_t num_experts() const override { return num_experts_; }
  const HierStats& stats() const { return stats_; }
  const NodeTopology& topology() const { return topo_; }

  Layout get_dispatch_layout(const at::Tensor& topk_idx_TK, int64_t num_experts) override {
    detail::check_num_experts(num_experts, num_experts_);
    return detail::compute_layout(topk_idx_TK, num_experts, topo_.world_size);
  }

  Dispatched dispatch(const at::Tensor& x_TH, const at::Tensor& topk_idx_TK, const at::Tensor& topk_weights_TK,
                      const Layout& layout, const Handle* cached) override {
    std::shared_ptr<HierState> st;
    at::Tensor x, weights;
    SplitRouting split;
    if (cached) {
      st = state_of(*cached);
      x = x_TH.contiguous();
      if (x.dim() != 2 || x.size(0) != st->num_tokens) {
        throw Error("ep hierarchical: cached dispatch got x with " + std::to_string(x.dim() == 2 ? x.size(0) : -1) +
                        " rows, expected T=" + std::to_string(st->num_tokens) + " as in the handle",
                    "a cached handle only fits inputs with the same tokens as the dispatch that made it");
      }
    } else {
      detail::DispatchInputs in = detail::check_dispatch_inputs(x_TH, topk_idx_TK, topk_weights_TK, num_experts_);
      detail::compute_layout(in.topk_idx_TK, num_experts_, topo_.world_size);  // validates ids before any hop
      st = std::make_shared<HierState>();
      st->mode = cfg_.mode;
      st->num_tokens = in.x_TH.size(0);
      x = in.x_TH;
      weights = in.topk_weights_TK;
      split = split_routing(in.topk_idx_TK, experts_per_node_, topo_.node);
    }
    detail::payload_dtype(x, "x");

    // Hop 1: each token once to each other node holding one of its experts.
    Dispatched remote;
    if (inter_ && cached) {
      remote = inter_->dispatch(x, at::Tensor(), at::Tensor(), Layout{}, &st->inter);
    } else if (inter_) {
      remote = inter_->dispatch(x, split.remote_idx_TK, weights,
                                inter_->get_dispatch_layout(split.remote_idx_TK, num_experts_));
      st->has_inter = true;
      st->inter = remote.handle;
      auto inter_st = detail::state_of(remote.handle);
      st->inter_offsets = inter_st->recv_offsets;
      for (int d = 0; d < topo_.num_nodes; ++d)
        if (d != topo_.node) st->inter_rows_sent += inter_st->routing.rows_to(d);
      st->flat_rows = count_distinct_groups(split.remote_idx_TK, num_experts_ / topo_.world_size);
    }

    // Hop 2: source node m's tokens (this node's own, or those received from node m) to
    // the ranks of this node holding their experts.
    std::vector<at::Tensor> xs, idx, w;
    if (!cached) st->per_expert.assign(num_local_experts(), 0);
    for (int m = 0; m < topo_.num_nodes; ++m) {
      at::Tensor xm = x, im = cached ? at::Tensor() : split.local_idx_TK, wm = weights;
      if (m != topo_.node) {
        const int64_t first = st->inter_offsets[m], n = st->inter_offsets[m + 1] - first;
        xm = remote.recv_x_NH.narrow(0, first, n).contiguous();
        if (!cached) {
          im = remote.recv_topk_idx_NK.narrow(0, first, n).contiguous();
          wm = remote.recv_topk_weights_NK.narrow(0, first, n).contiguous();
        }
      }
      Dispatched d = cached ? intra_->dispatch(xm, at::Tensor(), at::Tensor(), Layout{}, &st->intra[m])
                            : intra_->dispatch(xm, im, wm, intra_->get_dispatch_layout(im, experts_per_node_));
      xs.push_back(d.recv_x_NH);
      if (!cached) {
        st->intra.push_back(d.handle);
        idx.push_back(d.recv_topk_idx_NK);
        w.push_back(d.recv_topk_weights_NK);
        for (size_t e = 0; e < d.num_recv_tokens_per_expert.size(); ++e) st->per_expert[e] += d.num_recv_tokens_per_expert[e];
      }
    }
    at::Tensor recv = xs.size() == 1 ? xs[0] : at::cat(xs);
    if (!cached) {
      st->num_normal = recv.size(0);
      at::Tensor all_idx = idx.size() == 1 ? idx[0] : at::cat(idx), all_w = w.size() == 1 ? w[0] : at::cat(w);
      if (st->mode == Mode::kNormal) {
        st->recv_topk_idx_NK = all_idx;
        st->recv_topk_weights_NK = all_w;
      } else {
        make_low_latency(*st, all_idx, all_w, num_local_experts());
      }
    }
    if (st->mode == Mode::kLowLatency) recv = recv.index_select(0, st->ll_row);

    ++stats_.dispatches;
    stats_.inter_rows += st->inter_rows_sent;
    stats_.flat_inter_rows += st->flat_rows;
    stats_.inter_payload_bytes += st->inter_rows_sent * x.size(1) * x.element_size();
    if (st->has_inter) stats_.forwarded_rows += st->inter_offsets.back();

    Dispatched out;
    out.recv_x_NH = std::move(recv);
    out.recv_topk_idx_NK = st->recv_topk_idx_NK;
    out.recv_topk_weights_NK = st->recv_topk_weights_NK;
    out.num_recv_tokens_per_expert = st->per_expert;
    out.handle.num_tokens = st->num_tokens;
    out.handle.num_recv = st->num_recv();
    out.handle.state = std::move(st);
    return out;
  }

  at::Tensor combine(const at::Tensor& y_NH, const Handle& handle) override {
    auto st = state_of(handle);
    at::Tensor y = detail::check_combine_input(y_NH, st->num_recv());
    if (st->mode == Mode::kLowLatency) {  // back to source order: sum each token's expert rows
      y = at::zeros({st->num_normal, y.size(1)}, y.options().dtype(at::kFloat))
              .index_add_(0, st->ll_row, y.to(at::kFloat))
              .to(y.scalar_type());
    }
    // Hop 2 back: node m's share of the rows returns to the rank that sent it on this node.
    at::Tensor local;
    std::vector<at::Tensor> remote;
    int64_t first = 0;
    for (int m = 0; m < topo_.num_nodes; ++m) {
      const int64_t n = st->intra[m].num_recv;
      at::Tensor part = intra_->combine(y.narrow(0, first, n).contiguous(), st->intra[m]);
      first += n;
      if (m == topo_.node) local = part;
      else remote.push_back(part);
    }
    if (!inter_) return local;
    // Hop 1 back: the inter receive held other nodes' rows in node order (none from this
    // node: its experts were masked out of the inter routing), as `remote` is.
    at::Tensor back = inter_->combine(at::cat(remote), st->inter);
    if (local.scalar_type() == at::kFloat) return local + back;
    return (local.to(at::kFloat) + back.to(at::kFloat)).to(local.scalar_type());
  }

 private:
  static std::shared_ptr<HierState> state_of(const Handle& h) {
    auto st = std::static_pointer_cast<HierState>(h.state);
    if (!st) throw Error("ep hierarchical: combine/cached dispatch got an empty handle", "pass the handle a dispatch returned");
    return st;
  }

  // Immutable after construction.
  const Config cfg_;
  const int64_t num_experts_;
  const int rank_;
  const NodeTopology topo_;
  const int64_t experts_per_node_;
  std::shared_ptr<Group> intra_;  // this node's ranks, experts_per_node_ experts
  std::shared_ptr<Group> inter_;  // the ranks with this local index, one per node; null on one node
  HierStats stats_;               // updated by dispatch
};

const HierarchicalGroup& as_hier(const Group& g) {
  auto* h = dynamic_cast<const HierarchicalGroup*>(&g);
  if (!h) throw Error("ep: this group is not a hierarchical group", "create it with [ep] backend = \"hierarchical\"");
  return *h;
}

}  // namespace

std::shared_ptr<Group> hierarchical_group(const Config& cfg, int64_t num_experts) {
  // Topology first: a bad LOCAL_WORLD_SIZE fails on every rank before anyone waits on a peer.
  const env::Rendezvous rdv = env::rendezvous();
  const NodeTopology topo = NodeTopology::make(rdv.rank, rdv.world_size, env::local_world_size());
  detail::World w = detail::join_world("hierarchical", cfg.timeout_s);
  cfg.validate(num_experts, w.world_size);
  return std::make_shared<HierarchicalGroup>(cfg, num_experts, w, topo);
}

HierStats hier_stats(const Group& g) { return as_hier(g).stats(); }
NodeTopology hier_topology(const Group& g) { return as_hier(g).topology(); }

}  // namespace moerl::ep::hier
