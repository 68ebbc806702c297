// Row kernels of the fused next-token statistics (model/cuda/token_stats.h wraps them), on raw
// device pointers: z is [rows, vocab] logits (bf16 or f32, row-major), x = z * inv_t.
//   forward:  lse = log sum exp x, logp = x[target] - lse and ent = -sum p log p (p = softmax x),
//             float32 per row; ent may be null.
//   backward: z := inv_t * (-p (g + g_ent (log p + ent)) + onehot(target) g), in place, in z's
//             dtype; g_ent and ent may be null (no entropy term).
// Enqueue on `stream` and return the launch status; no sync.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace moerl::model::cuda {

cudaError_t token_stats_forward(const void* z, int64_t rows, int64_t vocab, bool bf16, const int64_t* targets,
                                float inv_t, float* logp, float* ent, float* lse, cudaStream_t stream);
cudaError_t token_stats_backward(void* z, int64_t rows, int64_t vocab, bool bf16, const int64_t* targets,
                                 const float* lse, const float* g_logp, const float* g_ent, const float* ent,
                                 float inv_t, cudaStream_t stream);

}  // namespace moerl::model::cuda
