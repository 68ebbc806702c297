// Page-locking of host memory for fast device-to-host copies, device-agnostic: a CUDA build
// installs cudaHostRegister / cudaHostUnregister (model/cuda/host_pinning_cuda.h, called by
// job::enable_gpu_paths); without it pin_host_memory answers false and copies stay pageable
// (the driver stages them through a bounce buffer: ~2 GB/s on the H100 run of docs/perf.md,
// against tens of GB/s into pinned memory).
//
//   if (model::pin_host_memory(p, n)) { dst.copy_(gpu_src, /*non_blocking=*/true); ... }
//   model::unpin_host_memory(p);   // before munmap / free
// Thread-safe once installed (install before the first pin).
#pragma once

#include <cstddef>

namespace moerl::model {

struct HostPinning {
  bool (*pin)(void* p, size_t bytes) = nullptr;  // false: not pinned (the error is cleared)
  void (*unpin)(void* p) = nullptr;
};
void set_host_pinning(HostPinning hooks);

bool pin_host_memory(void* p, size_t bytes);
void unpin_host_memory(void* p);

}  // namespace moerl::model
