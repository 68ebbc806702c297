// Fused SwiGLU on raw device pointers (bf16 or f32): h = silu(gate) * up, where each row of
// gu holds [gate(I) | up(I)], and its backward. model/cuda/moe_gpu.h wraps these.
//
//   swiglu_forward(gu, M, I, /*bf16=*/true, h, stream);
//   swiglu_backward(gu, dh, M, I, true, dgu, stream);
//
// Enqueue on `stream` and return the launch status; no sync. Thread-safe on disjoint outputs.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace moerl::model::cuda {

cudaError_t swiglu_forward(const void* gu, int64_t rows, int64_t inter, bool bf16, void* h, cudaStream_t stream);
cudaError_t swiglu_backward(const void* gu, const void* dh, int64_t rows, int64_t inter, bool bf16, void* dgu,
                            cudaStream_t stream);

}  // namespace moerl::model::cuda
