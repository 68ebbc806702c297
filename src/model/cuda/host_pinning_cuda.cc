#include "model/cuda/host_pinning_cuda.h"

#include <cuda_runtime_api.h>

#include "base/log.h"
#include "model/host_pinning.h"

namespace moerl::model::cuda {

namespace {

bool pin(void* p, size_t bytes) {
  const cudaError_t err = cudaHostRegister(p, bytes, cudaHostRegisterPortable);
  if (err == cudaSuccess) return true;
  (void)cudaGetLastError();  // not sticky: the caller copies through pageable memory instead
  MOERL_LOG(WARN) << "cudaHostRegister of " << (bytes >> 20) << " MiB failed (" << cudaGetErrorString(err)
                  << "); device-to-host copies into it stay pageable";
  return false;
}

void unpin(void* p) {
  if (cudaHostUnregister(p) != cudaSuccess) (void)cudaGetLastError();
}

}  // namespace

void install_host_pinning() { set_host_pinning({&pin, &unpin}); }

}  // namespace moerl::model::cuda
