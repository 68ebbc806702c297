// HierarchicalGroup: dispatch = one inter-node dispatch (per-node deduplicated), then one
// intra-node dispatch that forwards this rank's tokens and every row it received from
// other nodes; combine = one intra-node combine, then one inter-node combine. Both hops are
// ordinary Groups (fabric, alltoall, cuda_ipc, ...) built over sub-worlds of the
// rendezvous; this file only reshapes routing and rows.
//
// How one intra round keeps the contract's order (global source rank s = node * L + local,
// then token): the intra hop's expert ids carry each row's source node (tag_source_node,
// no extra bytes on the wire), so the receiver knows (local source l, source node m) of
// every row and a stable sort on m * L + l restores the order (source_order).
#include "ep/hier/hier_group.h"

#include <utility>
#include <vector>

#include "base/env.h"
#include "base/error.h"
#include "ep/kernels/rows.h"
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
  Handle intra;                        // the one intra dispatch of [own tokens; inter receive]
  at::Tensor order;                    // output row i is intra receive row order[i]; undefined: identity
  int64_t num_normal = 0;              // received rows in source order (= intra receive rows)
  int64_t num_out = 0;                 // rows returned: num_normal (normal), rows per expert (low_latency)
  at::Tensor recv_topk_idx_NK, recv_topk_weights_NK;
  std::vector<int64_t> per_expert;
};

// Source order from the intra receive order: the intra hop delivers by intra source l,
// then forwarder row ([own tokens; rows from other nodes in node order]); the contract
// wants global source m * L + l, then token. Within one (l, m) the rows keep their order,
// so a stable sort on m * L + l is the contract's order. Undefined when already in order.
at::Tensor source_order(const at::Tensor& source_node_N, const std::vector<int64_t>& intra_recv_counts, int L) {
  std::vector<int64_t> l(intra_recv_counts.size());
  for (size_t i = 0; i < l.size(); ++i) l[i] = static_cast<int64_t>(i);
  const at::Tensor local_N = at::repeat_interleave(at::tensor(l, at::kLong), at::tensor(intra_recv_counts, at::kLong));
  const at::Tensor key = source_node_N * L + local_N.to(source_node_N.device());
  at::Tensor order = std::get<1>(at::sort(key, /*stable=*/c10::optional<bool>(true), /*dim=*/0, /*descending=*/false));
  const bool identity = key.numel() < 2 || key.narrow(0, 1, key.size(0) - 1).ge(key.narrow(0, 0, key.size(0) - 1)).all().item<bool>();
  return identity ? at::Tensor() : order;
}

// Row permutations of payloads. NOTE: on the CPU, the memcpy row kernels: libtorch's
// index_select/index_copy_ on bfloat16 rows cost ~20x a memcpy there (measured in bench ep).
at::Tensor take_rows(const at::Tensor& x_NH, const at::Tensor& rows) {  // out[i] = x[rows[i]]
  if (!x_NH.is_cpu()) return x_NH.index_select(0, rows);
  at::Tensor out = at::empty({rows.size(0), x_NH.size(1)}, x_NH.options());
  kernels::gather_rows(x_NH.data_ptr(), x_NH.size(1) * x_NH.element_size(), rows.data_ptr<int64_t>(), rows.size(0),
                       out.data_ptr());
  return out;
}
at::Tensor put_rows(const at::Tensor& y_NH, const at::Tensor& rows) {  // out[rows[i]] = y[i]
  if (!y_NH.is_cpu()) return at::empty_like(y_NH).index_copy_(0, rows, y_NH);
  at::Tensor out = at::empty_like(y_NH);
  kernels::scatter_rows(y_NH.data_ptr(), y_NH.size(1) * y_NH.element_size(), rows.data_ptr<int64_t>(), rows.size(0),
                        out.data_ptr());
  return out;
}
// out[rows[i]] += y[i] over `num_out` rows, summed in float32, returned in y's dtype.
at::Tensor sum_rows(const at::Tensor& y_NH, const at::Tensor& rows, int64_t num_out) {
  at::Tensor acc = at::zeros({num_out, y_NH.size(1)}, y_NH.options().dtype(at::kFloat));
  if (!y_NH.is_cpu()) return acc.index_add_(0, rows, y_NH.to(at::kFloat)).to(y_NH.scalar_type());
  const kernels::DType dt = detail::payload_dtype(y_NH, "y");
  kernels::accumulate_rows(y_NH.data_ptr(), dt, y_NH.size(1), rows.data_ptr<int64_t>(), rows.size(0),
                           acc.data_ptr<float>());
  return acc.to(y_NH.scalar_type());
}

// Low-latency rows from source-order rows: for each local expert, the rows naming it (in
// source order), with only the top-k slots naming it set (ep.h's low-latency contract).
// Returns the source-order row of each low-latency row.
at::Tensor make_low_latency(HierState& st, const at::Tensor& idx_NK, const at::Tensor& w_NK, int64_t El) {
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
  st.recv_topk_idx_NK = at::cat(idx);
  st.recv_topk_weights_NK = at::cat(w);
  return at::cat(rows);
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
    // NOTE: a forwarder sends its own T tokens and up to T rows from each other node in its
    // one intra round, so the intra buffers are sized for N times the tokens.
    intra.max_tokens_per_rank = cfg.max_tokens_per_rank * topo.num_nodes;
    Config inter = cfg;
    inter.mode = Mode::kNormal;
    inter.backend = cfg.inter_backend;
    // NOTE: not FI_PROVIDER: libfabric loads only the providers it lists, so with both hops
    // on fabric it must name both (FI_PROVIDER=shm,tcp) or be unset.
    inter.provider = !cfg.inter_provider.empty() ? cfg.inter_provider : !cfg.provider.empty() ? cfg.provider : "tcp";
    // Every rank builds intra then inter, so the collective constructors pair up. The intra
    // group's experts are tagged with the source node (tag_source_node).
    const int64_t tagged_experts = experts_per_node_ * topo.num_nodes;
    intra_ = topo.local_world_size == 1
                 ? loopback_group(tagged_experts)
                 : detail::make_group_in(intra, tagged_experts,
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

    // Hop 2, one round: this rank's tokens and every row received from other nodes (in node
    // order) to the ranks of this node holding their experts, ids tagged with the source node.
    const int64_t forwarded = inter_ ? st->inter_offsets.back() : 0;
    const at::Tensor fwd_x = forwarded > 0 ? at::cat({x, remote.recv_x_NH}) : x;
    Dispatched d;
    if (cached) {
      d = intra_->dispatch(fwd_x, at::Tensor(), at::Tensor(), Layout{}, &st->intra);
    } else {
      at::Tensor fwd_idx = split.local_idx_TK, fwd_w = weights;
      std::vector<int64_t> nodes{topo_.node}, rows{st->num_tokens};
      if (forwarded > 0) {
        fwd_idx = at::cat({fwd_idx, remote.recv_topk_idx_NK.to(fwd_idx.device())});
        fwd_w = at::cat({fwd_w, remote.recv_topk_weights_NK.to(fwd_w.device())});
        for (int m = 0; m < topo_.num_nodes; ++m)
          if (m != topo_.node) nodes.push_back(m), rows.push_back(st->inter_offsets[m + 1] - st->inter_offsets[m]);
      }
      const at::Tensor fwd_node =
          at::repeat_interleave(at::tensor(nodes, at::kLong), at::tensor(rows, at::kLong)).to(fwd_idx.device());
      fwd_idx = tag_source_node(fwd_idx, fwd_node, num_local_experts(), topo_.num_nodes);
      d = intra_->dispatch(fwd_x, fwd_idx, fwd_w, intra_->get_dispatch_layout(fwd_idx, intra_->num_experts()));
      st->intra = d.handle;
      st->num_normal = d.handle.num_recv;
      const UntaggedRows u = untag_source_node(d.recv_topk_idx_NK, num_local_experts());
      // Rows from each local rank (the loopback of L = 1 records no per-source counts).
      const std::vector<int64_t> per_local = topo_.local_world_size == 1 ? std::vector<int64_t>{st->num_normal}
                                                                          : detail::state_of(d.handle)->recv_counts;
      st->order = source_order(u.source_node_N, per_local, topo_.local_world_size);
      at::Tensor idx = u.local_idx_NK, w = d.recv_topk_weights_NK;
      if (st->order.defined()) idx = idx.index_select(0, st->order), w = w.index_select(0, st->order);
      if (st->mode == Mode::kNormal) {
        st->recv_topk_idx_NK = idx;
        st->recv_topk_weights_NK = w;
        st->per_expert.assign(num_local_experts(), 0);  // tagged expert m * El + e is expert e
        for (size_t v = 0; v < d.num_recv_tokens_per_expert.size(); ++v)
          st->per_expert[v % num_local_experts()] += d.num_recv_tokens_per_expert[v];
        st->num_out = st->num_normal;
      } else {
        const at::Tensor ll_row = make_low_latency(*st, idx, w, num_local_experts());
        st->order = st->order.defined() ? st->order.index_select(0, ll_row) : ll_row;
        st->num_out = st->order.size(0);
      }
    }
    at::Tensor recv = st->order.defined() ? take_rows(d.recv_x_NH, st->order) : d.recv_x_NH;

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
    out.handle.num_recv = st->num_out;
    out.handle.state = std::move(st);
    return out;
  }

  at::Tensor combine(const at::Tensor& y_NH, const Handle& handle) override {
    auto st = state_of(handle);
    const at::Tensor y = detail::check_combine_input(y_NH, st->num_out);
    // Back to the intra receive order; low-latency rows of one source row are summed.
    at::Tensor y_intra = y;
    if (st->mode == Mode::kLowLatency) {
      y_intra = sum_rows(y, st->order, st->num_normal);
    } else if (st->order.defined()) {
      y_intra = put_rows(y, st->order);
    }
    // Hop 2 back: rows [0, T) are this rank's tokens' partial sums from this node, the rest
    // the partial sums of the rows it forwarded, in the inter receive's order.
    const at::Tensor part = intra_->combine(y_intra, st->intra);
    if (!inter_) return part;
    const at::Tensor local = part.narrow(0, 0, st->num_tokens);
    // Hop 1 back: one row per (token, other node) to the rank that sent it.
    const at::Tensor back = inter_->combine(part.narrow(0, st->num_tokens, part.size(0) - st->num_tokens), st->inter);
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
