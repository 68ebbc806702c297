// Fused next-token statistics of a chunk of logits on the GPU, for train::chunked_token_stats
// (job::enable_gpu_paths installs them there): one read of the [N, V] logits gives each row's
// log-probability of its target, its entropy and its log-normaliser, and one pass writes the
// logits' gradient over them, instead of a float32 copy and a dozen elementwise passes each.
// Only the temperature transform (x = z / T) is fused; top-k/top-p scoring keeps the generic path.
//
//   token_stats_forward(z_NV, targets_N, 1.0, logp_N, ent_N, lse_N);      // outputs preallocated
//   token_stats_backward(z_NV, targets_N, lse_N, g_logp_N, g_ent_N, ent_N, 1.0);  // z_NV := dz
// z_NV: contiguous bf16 or float32 CUDA logits; targets int64; the rest float32 [N] on the same
// device (ent_N/g_ent_N may be undefined: no entropy). Enqueued on the current stream.
// Failure: other dtypes, devices or shapes throw moerl::Error.
#pragma once

#include <ATen/ATen.h>

namespace moerl::model::cuda {

void token_stats_forward(const at::Tensor& z_NV, const at::Tensor& targets_N, double inv_t, const at::Tensor& logp_N,
                         const at::Tensor& ent_N, const at::Tensor& lse_N);
void token_stats_backward(const at::Tensor& z_NV, const at::Tensor& targets_N, const at::Tensor& lse_N,
                          const at::Tensor& g_logp_N, const at::Tensor& g_ent_N, const at::Tensor& ent_N,
                          double inv_t);

}  // namespace moerl::model::cuda
