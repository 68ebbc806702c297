// The cuda_ipc EP transport: ranks on one node (one GPU each, or several sharing one GPU)
// map each other's device buffers once (cudaIpcGetMemHandle / cudaIpcOpenMemHandle) and
// write rows, counts and top-k metadata straight into them (over NVLink between GPUs);
// completion is signalled by flags in the same buffers that the receiving GPU polls, so no
// host round trip sits between ranks (DeepEP's intranode design). A new routing plan costs
// one local host sync (the received counts size the output); a cached dispatch and a
// combine cost none. The TCPStore of ep/torch/world.h is used only to swap handles and at
// creation and destruction.
//
//   ep::Config cfg;  cfg.max_tokens_per_rank = 4096;  cfg.hidden = 2048;
//   auto g = ep::cuda_ipc_group(cfg, /*num_experts=*/128);     // collective; env RANK etc.
//   ep::Dispatched d = g->dispatch(x_TH, idx_TK, w_TK, g->get_dispatch_layout(idx_TK, 128));
//   at::Tensor y_TH = g->combine(expert_out_NH, d.handle);     // CUDA tensors throughout
//
// Both modes (normal, low_latency) keep ep.h's received-row order. Thread-safety: one thread
// per Group, one CUDA stream (the current one) for its calls. Failures (peer gone, timeout,
// oversize input) throw moerl::Error naming the rank and what was missing: a peer that does
// not write within cfg.timeout_s is found by the GPU's wait, and reported by the next dispatch
// (or this one's host sync). Buffers: flags, 2 * R regions of max_rows rows of hidden float32
// (ep/buffer_layout.h; max_rows = max_tokens_per_rank, times min(max_topk, E/R) in low_latency),
// and R metadata slots.
#pragma once

#include <memory>

#include "ep/ep.h"

namespace moerl::ep {

namespace detail {
struct World;
}  // namespace detail

std::shared_ptr<Group> cuda_ipc_group(const Config& cfg, int64_t num_experts);
// Over an already joined world: the intra-node hop of a hierarchical group (one node's ranks).
std::shared_ptr<Group> cuda_ipc_group_in(const Config& cfg, int64_t num_experts, const detail::World& world);

}  // namespace moerl::ep
