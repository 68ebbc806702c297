// Flag kernels of ep/cuda/signals.h: release stores and acquire spins at system scope, so the
// same code orders writes between processes on one GPU and between GPUs over NVLink.
#include "ep/cuda/signals.h"

namespace moerl::ep::cuda {
namespace {

__device__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ uint64_t load_acquire(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ void store_release(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__global__ void signal_kernel(FlagPtrs flags, int n, uint64_t value) {
  const int i = threadIdx.x;
  __threadfence_system();  // this stream's earlier writes (earlier kernels, copies) first
  if (i < n) store_release(flags.ptr[i], value);
}

__global__ void wait_kernel(const uint64_t* flags, int n, uint64_t value, uint64_t timeout_ns, int32_t kind,
                            FlagError* err) {
  __shared__ int late;  // index + 1 of the first late flag; host memory is written once, below
  const int i = threadIdx.x;
  if (i == 0) late = 0;
  __syncthreads();
  if (i < n) {
    const uint64_t start = now_ns();
    while (load_acquire(flags + i) < value) {
      if (now_ns() - start > timeout_ns) {
        atomicCAS(&late, 0, i + 1);
        break;
      }
      __nanosleep(256);
    }
  }
  __syncthreads();
  if (i == 0 && late != 0 && *static_cast<volatile int32_t*>(&err->flag) == 0) {
    static_cast<volatile FlagError*>(err)->kind = kind;
    static_cast<volatile FlagError*>(err)->flag = late;
  }
  __threadfence_system();
}

}  // namespace

cudaError_t signal_flags(const FlagPtrs& flags, int n, uint64_t value, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (n > kMaxFlagPeers) return cudaErrorInvalidValue;
  signal_kernel<<<1, 64, 0, stream>>>(flags, n, value);
  return cudaGetLastError();
}

cudaError_t wait_flags(const uint64_t* flags, int n, uint64_t value, uint64_t timeout_ns, int32_t kind,
                       FlagError* err, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (n > kMaxFlagPeers) return cudaErrorInvalidValue;
  wait_kernel<<<1, 64, 0, stream>>>(flags, n, value, timeout_ns, kind, err);
  return cudaGetLastError();
}

}  // namespace moerl::ep::cuda
