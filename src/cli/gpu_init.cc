// GPU setup of the `moerl` binary: with MOERL_CUDA builds and a visible GPU, each rank takes
// GPU LOCAL_RANK mod the GPU count, the MoE blocks run their experts as grouped GEMMs,
// generate() takes the CUDA-graph decode path, and the EP backends cuda_ipc and nccl become
// available to ep::make_group. CPU builds do nothing here; the same commands run on the CPU.
#include "cli/command.h"

#ifdef MOERL_WITH_CUDA
#include <ATen/Context.h>
#include <c10/cuda/CUDAFunctions.h>

#include "base/env.h"
#include "ep/cuda/cuda_ipc_group.h"
#include "ep/cuda/nccl_group.h"
#include "model/cuda/fast_generate.h"
#include "model/cuda/moe_gpu.h"
#endif

namespace moerl::cli {

void init_gpu() {
#ifdef MOERL_WITH_CUDA
  if (at::hasCUDA()) {
    const int n = static_cast<int>(c10::cuda::device_count());
    if (n > 1) c10::cuda::set_device(static_cast<c10::DeviceIndex>(env::rendezvous().local_rank % n));
    model::cuda::install_cuda_experts();
    model::cuda::install_fast_generate();
    ep::register_backend(ep::Backend::kCudaIpc, &ep::cuda_ipc_group);
    ep::register_backend(ep::Backend::kNccl, &ep::nccl_group);
  }
#endif
}

}  // namespace moerl::cli
