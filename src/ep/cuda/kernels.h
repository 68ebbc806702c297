// CUDA versions of the EP row kernels (ep/kernels/ is the CPU reference): dispatch layout,
// pack (gather rows by destination), unpack (scatter received rows), accumulate, and the
// weighted top-k combine. Raw device pointers, no at::Tensor (ep/cuda/ops.h wraps them).
//
//   ep::cuda::gather_rows(x, H * 2, rows, n, send, stream);       // pack
//   ep::cuda::weighted_combine(y, DType::kBFloat16, H, pos, w, T, K, out, stream);
//
// Every function only enqueues work on `stream` and returns the launch status (cudaSuccess
// or the error); nothing synchronises. Thread-safe on disjoint outputs.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ep/kernels/rows.h"

namespace moerl::ep::cuda {

using kernels::DType;

// Same contract as kernels::compute_layout. Outputs are zeroed here first. Entries outside
// [-1, E) are skipped and counted into *num_bad (device int64, zeroed here) so the caller
// can raise the error after its one sync.
cudaError_t compute_layout(const int64_t* topk_idx, int64_t num_tokens, int64_t topk, int64_t num_experts,
                           int num_ranks, int64_t* per_rank, int64_t* per_expert, bool* in_rank,
                           int64_t* num_bad, cudaStream_t stream);

// dst[i] = src[rows[i]] (row_bytes wide), i < n. With `scale` (float [n]) the rows are
// bf16/f32 values multiplied by scale[i] (row_bytes must then be h * dtype_size).
cudaError_t gather_rows(const void* src, int64_t row_bytes, const int64_t* rows, int64_t n, void* dst,
                        cudaStream_t stream);
cudaError_t gather_rows_scaled(const void* src, DType dtype, int64_t h, const int64_t* rows,
                               const float* scale, int64_t n, void* dst, cudaStream_t stream);
// dst[rows[i]] = src[i], i < n.
cudaError_t scatter_rows(const void* src, int64_t row_bytes, const int64_t* rows, int64_t n, void* dst,
                         cudaStream_t stream);
// acc[token[i], :] += rows[i, :] in float32 (atomics; order of additions unspecified).
cudaError_t accumulate_rows(const void* rows, DType dtype, int64_t h, const int64_t* token, int64_t n,
                            float* acc, cudaStream_t stream);
// out[t, :] = sum_k w[t,k] * y[pos[t,k], :] for pos >= 0 (fp32 accumulation, one write
// per output row, deterministic). w may be null (weights 1). out has y's dtype.
cudaError_t weighted_combine(const void* y, DType dtype, int64_t h, const int64_t* pos_TK, const float* w_TK,
                             int64_t num_tokens, int64_t topk, void* out, cudaStream_t stream);
// dots[t,k] = <a[t,:], y[pos[t,k],:]> in fp32, 0 where pos < 0 (combine's weight gradient).
cudaError_t row_dots(const void* a, const void* y, DType dtype, int64_t h, const int64_t* pos_TK,
                     int64_t num_tokens, int64_t topk, float* dots, cudaStream_t stream);

}  // namespace moerl::ep::cuda
