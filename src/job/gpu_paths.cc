#include "job/gpu_paths.h"

#include <ATen/Context.h>

#include "base/error.h"

#ifdef MOERL_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>

#include <mutex>

#include "base/env.h"
#include "ep/cuda/cuda_ipc_group.h"
#include "ep/cuda/nccl_group.h"
#include "ep/torch/world.h"
#include "model/cuda/attention_gpu.h"
#include "model/cuda/decode_kernels.h"
#include "model/cuda/fast_generate.h"
#include "model/cuda/host_pinning_cuda.h"
#include "model/cuda/moe_gpu.h"
#include "model/cuda/token_stats.h"
#include "train/chunked_logprobs.h"
#endif

namespace moerl::job {

void enable_gpu_paths() {
#ifdef MOERL_WITH_CUDA
  static std::once_flag once;
  std::call_once(once, [] {
    if (!at::hasCUDA()) return;
    const int n = static_cast<int>(c10::cuda::device_count());
    if (n > 1) c10::cuda::set_device(static_cast<c10::DeviceIndex>(env::rendezvous().local_rank % n));
    model::cuda::install_cuda_experts();
    model::cuda::install_cuda_attention();
    train::set_token_stats_kernels({&model::cuda::token_stats_forward, &model::cuda::token_stats_backward});
    model::cuda::install_fast_generate();
    model::cuda::install_host_pinning();  // shared-memory weight versions copied by DMA
    ep::register_backend(ep::Backend::kCudaIpc, &ep::cuda_ipc_group);
    ep::register_backend(ep::Backend::kNccl, &ep::nccl_group);
    // Dense gradients of a data-parallel trainer group on GPUs: NCCL, not host copies.
    ep::register_device_allreduce(&ep::nccl_allreduce);
    // The hierarchical group's intra-node hop (ep/hier): cuda_ipc over one node's ranks.
    ep::detail::register_world_backend(ep::Backend::kCudaIpc, &ep::cuda_ipc_group_in);
  });
#endif
}

void check_device_name(const std::string& spelling, const std::string& source) {
  if (spelling != "cpu" && spelling != "cuda" && spelling.rfind("cuda:", 0) != 0) {
    throw Error(source + " " + spelling + " is not a device", "use cpu, cuda or cuda:N", ErrorCode::kInvalidInput);
  }
}

at::Device open_device(const std::string& spelling, const std::string& source) {
  check_device_name(spelling, source);
  if (spelling == "cpu") return at::Device(at::kCPU);
  if (!at::hasCUDA()) {
    throw Error(source + " " + spelling + " but this process sees no CUDA GPU",
                "build with -DMOERL_CUDA=ON against a CUDA libtorch and run on a GPU machine, or use the cpu",
                ErrorCode::kInvalidInput);
  }
  enable_gpu_paths();
  return at::Device(spelling);
}

void enable_gpu_paths_for(const JobConfig& cfg) {
  if (cfg.model.device != "cpu" || cfg.ep_backend == "cuda_ipc" || cfg.ep_backend == "nccl") enable_gpu_paths();
}

bool set_decode_kernels(bool experts, bool attention, bool sampling) {
#ifdef MOERL_WITH_CUDA
  model::cuda::set_decode_kernels({.experts = experts, .attention = attention, .sampling = sampling});
  return true;
#else
  (void)experts, (void)attention, (void)sampling;
  return false;
#endif
}

bool restore_decode_kernels() {
#ifdef MOERL_WITH_CUDA
  model::cuda::set_decode_kernels({});
  return true;
#else
  return false;
#endif
}

int64_t decode_graph_failures() {
#ifdef MOERL_WITH_CUDA
  return model::cuda::graph_capture_failures();
#else
  return 0;
#endif
}

int64_t gpu_peak_allocated_bytes() {
#ifdef MOERL_WITH_CUDA
  if (!at::hasCUDA()) return -1;
  // NOTE: index 0 of each stat array is the aggregate over the small and large pools.
  return c10::cuda::CUDACachingAllocator::getDeviceStats(c10::cuda::current_device()).allocated_bytes[0].peak;
#else
  return -1;
#endif
}

void reset_gpu_peak_allocated() {
#ifdef MOERL_WITH_CUDA
  if (at::hasCUDA()) c10::cuda::CUDACachingAllocator::resetPeakStats(c10::cuda::current_device());
#endif
}

}  // namespace moerl::job
