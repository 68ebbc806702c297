// Next-token log-probabilities (and the entropy of each position's distribution) straight from
// the final hidden states, for the positions a mask selects only, a chunk of positions at a
// time: logits = hidden · lm_headᵀ (in the model's dtype, then float32, as Model::forward and
// token_logprobs compute them), then model::sampling_logits (temperature, top-k, top-p), log-softmax, the
// target's entry. No [B, T, V] tensor is made: at vocab 151936 that is 0.6 MB per position in
// float32, so 256 sequences of 1,024 tokens would need 160 GB. With gradients, a custom
// autograd function keeps only the hidden states and recomputes each chunk's logits in the
// backward pass, so memory is O(chunk x V) either way.
//
//   TokenStats t = chunked_token_stats(out.hidden_BTH, policy.lm_head(), ids_BT, response_mask_BT,
//                                      sampling, /*chunk=*/1024, /*with_entropy=*/true);
//   t.logp_BT[b][t]: log p(ids[b][t] | ids[b][:t]) where mask_BT[b][t] > 0, else 0 (as
//   token_logprobs lays them out); t.entropy_BT likewise (undefined unless with_entropy).
// Pure function of its inputs; differentiable in hidden_BTH and lm_head_VH when they require
// grad. Errors: moerl::Error on shapes that disagree.
#pragma once

#include <ATen/ATen.h>

#include "model/sampler.h"

namespace moerl::train {

struct TokenStats {
  at::Tensor logp_BT;     // float32 [B,T]; 0 at unselected positions and at t = 0
  at::Tensor entropy_BT;  // float32 [B,T] (undefined unless asked for)
};

// mask_BT selects the positions t whose token ids[b][t] is scored (predicted from position
// t - 1); position 0 is never scored.
TokenStats chunked_token_stats(const at::Tensor& hidden_BTH, const at::Tensor& lm_head_VH, const at::Tensor& ids_BT,
                               const at::Tensor& mask_BT, const model::SamplingConfig& sampling, int64_t chunk,
                               bool with_entropy);

// Fused row kernels for a chunk's logits under temperature-only scoring (model/cuda/token_stats.h;
// job::enable_gpu_paths installs them for CUDA). forward fills logp, ent (when defined) and the
// log-normaliser lse of each row; backward overwrites the logits with their gradient.
struct TokenStatsKernels {
  void (*forward)(const at::Tensor& z_NV, const at::Tensor& targets_N, double inv_t, const at::Tensor& logp_N,
                  const at::Tensor& ent_N, const at::Tensor& lse_N) = nullptr;
  void (*backward)(const at::Tensor& z_NV, const at::Tensor& targets_N, const at::Tensor& lse_N,
                   const at::Tensor& g_logp_N, const at::Tensor& g_ent_N, const at::Tensor& ent_N,
                   double inv_t) = nullptr;
};
void set_token_stats_kernels(TokenStatsKernels kernels);

}  // namespace moerl::train
