// Fused SwiGLU kernels: one pass over [gate|up] instead of silu, mul and their temporaries;
// 8 elements per thread with 16-byte accesses when I % 8 == 0, math in float32.
#include "model/cuda/swiglu.h"

#include <cuda_bf16.h>

#include <algorithm>

#include "model/cuda/packed_io.cuh"

namespace moerl::model::cuda {
namespace {

using namespace detail;  // NOLINT: the shared load/store helpers

__device__ float sigmoid(float x) { return 1.f / (1.f + __expf(-x)); }

template <class T, int C>
__global__ void fwd(const T* __restrict__ gu, int64_t rows, int64_t inter, T* __restrict__ h) {
  const int64_t per_row = inter / C, total = rows * per_row;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / per_row, c = (i % per_row) * C;
    float g[C], u[C], o[C];
    load<T, C>(gu + r * 2 * inter + c, g);
    load<T, C>(gu + r * 2 * inter + inter + c, u);
#pragma unroll
    for (int j = 0; j < C; ++j) o[j] = g[j] * sigmoid(g[j]) * u[j];
    store<T, C>(h + r * inter + c, o);
  }
}

template <class T, int C>
__global__ void bwd(const T* __restrict__ gu, const T* __restrict__ dh, int64_t rows, int64_t inter,
                    T* __restrict__ dgu) {
  const int64_t per_row = inter / C, total = rows * per_row;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / per_row, c = (i % per_row) * C;
    float g[C], u[C], d[C], dg[C], du[C];
    load<T, C>(gu + r * 2 * inter + c, g);
    load<T, C>(gu + r * 2 * inter + inter + c, u);
    load<T, C>(dh + r * inter + c, d);
#pragma unroll
    for (int j = 0; j < C; ++j) {
      const float s = sigmoid(g[j]);
      du[j] = d[j] * g[j] * s;
      dg[j] = d[j] * u[j] * s * (1.f + g[j] * (1.f - s));
    }
    store<T, C>(dgu + r * 2 * inter + c, dg);
    store<T, C>(dgu + r * 2 * inter + inter + c, du);
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

int grid_for(int64_t n, int threads) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>((n + threads - 1) / threads, 132 * 32)));
}

template <class T>
cudaError_t run_fwd(const void* gu, int64_t rows, int64_t inter, void* h, cudaStream_t s) {
  if (inter % 8 == 0 && aligned16(gu) && aligned16(h)) {
    fwd<T, 8><<<grid_for(rows * inter / 8, 256), 256, 0, s>>>(static_cast<const T*>(gu), rows, inter, static_cast<T*>(h));
  } else {
    fwd<T, 1><<<grid_for(rows * inter, 256), 256, 0, s>>>(static_cast<const T*>(gu), rows, inter, static_cast<T*>(h));
  }
  return cudaGetLastError();
}

template <class T>
cudaError_t run_bwd(const void* gu, const void* dh, int64_t rows, int64_t inter, void* dgu, cudaStream_t s) {
  if (inter % 8 == 0 && aligned16(gu) && aligned16(dh) && aligned16(dgu)) {
    bwd<T, 8><<<grid_for(rows * inter / 8, 256), 256, 0, s>>>(static_cast<const T*>(gu), static_cast<const T*>(dh),
                                                              rows, inter, static_cast<T*>(dgu));
  } else {
    bwd<T, 1><<<grid_for(rows * inter, 256), 256, 0, s>>>(static_cast<const T*>(gu), static_cast<const T*>(dh), rows,
                                                          inter, static_cast<T*>(dgu));
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t swiglu_forward(const void* gu, int64_t rows, int64_t inter, bool bf16, void* h, cudaStream_t stream) {
  if (rows <= 0 || inter <= 0) return cudaSuccess;
  return bf16 ? run_fwd<__nv_bfloat16>(gu, rows, inter, h, stream) : run_fwd<float>(gu, rows, inter, h, stream);
}

cudaError_t swiglu_backward(const void* gu, const void* dh, int64_t rows, int64_t inter, bool bf16, void* dgu,
                            cudaStream_t stream) {
  if (rows <= 0 || inter <= 0) return cudaSuccess;
  return bf16 ? run_bwd<__nv_bfloat16>(gu, dh, rows, inter, dgu, stream)
              : run_bwd<float>(gu, dh, rows, inter, dgu, stream);
}

}  // namespace moerl::model::cuda
