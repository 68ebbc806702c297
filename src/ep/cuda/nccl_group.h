// The GPU baseline EP transport: the standard all-to-all path over c10d ProcessGroupNCCL,
// as frameworks without DeepEP-style kernels run it. Routing is planned on the GPU with
// tensor ops, per-destination counts go through an all-to-all and one copy to the host
// (the sizes all-to-all-v needs), rows and top-k metadata move with all_to_all_single, and
// index ops restore the received order. Same row order as every other backend, so
// `moerl bench ep --backend cuda_ipc,nccl` compares like with like.
//
//   ep::Config cfg;  cfg.backend = ep::Backend::kNccl;
//   auto g = ep::nccl_group(cfg, /*num_experts=*/256);   // collective; env RANK etc.
//   ep::Dispatched d = g->dispatch(x_TH, idx_TK, w_TK, g->get_dispatch_layout(idx_TK, 256));
//
// One GPU per rank (the current device; NCCL refuses two ranks on one GPU). Thread-safety:
// one thread per Group. A dead or hung peer surfaces as an Error after cfg.timeout_s.
#pragma once

#include <memory>

#include "ep/ep.h"
#include "ep/torch/control_group.h"

namespace moerl::ep {

std::shared_ptr<Group> nccl_group(const Config& cfg, int64_t num_experts);

// The device collective of ControlGroup::allreduce_tensor (register_device_allreduce): a
// ProcessGroupNCCL over `world`, summing CUDA tensors in place on the caller's stream order
// (the wait makes the current stream wait for NCCL's, the host does not block).
DeviceAllReduce nccl_allreduce(const detail::World& world, double timeout_s);

}  // namespace moerl::ep
