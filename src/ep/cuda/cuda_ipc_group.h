// The cuda_ipc EP transport: ranks on one node (one GPU each, or several sharing one GPU)
// map each other's receive buffers once (cudaIpcGetMemHandle / cudaIpcOpenMemHandle) and
// write rows straight into them with the ep/cuda pack kernels (over NVLink between GPUs).
// Only the per-destination counts and top-k metadata go through the host (the TCPStore of
// ep/torch/world.h), as the normal mode's count exchange.
//
//   ep::Config cfg;  cfg.max_tokens_per_rank = 4096;  cfg.hidden = 2048;
//   auto g = ep::cuda_ipc_group(cfg, /*num_experts=*/128);     // collective; env RANK etc.
//   ep::Dispatched d = g->dispatch(x_TH, idx_TK, w_TK, g->get_dispatch_layout(idx_TK, 128));
//   at::Tensor y_TH = g->combine(expert_out_NH, d.handle);     // CUDA tensors throughout
//
// Both modes (normal, low_latency) keep ep.h's received-row order. Thread-safety: one thread
// per Group. Failures (peer gone, timeout, oversize input) throw moerl::Error naming the
// rank and what was missing. Buffers: 2 * R regions of max_rows rows of hidden float32
// (ep/buffer_layout.h; max_rows = max_tokens_per_rank, times min(max_topk, E/R) in low_latency).
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
