// Loss aggregation over tokens, normalised by counts of the GLOBAL batch so that the
// losses of micro-batches (and of data-parallel ranks) sum to the full-batch loss.
// Tensor legend: B sequences of a micro-batch, L padded response length.
//
//   LossNorm norm = LossNorm::from_mask(full_batch_mask_BL, /*max_len=*/max_new_tokens);
//   // (with data parallelism, all-reduce-sum num_tokens and num_seqs across ranks)
//   for (auto& mb : micro_batches)
//     (aggregate(token_loss_BL(mb), mb.mask_BL, LossAgg::kTokenMean, norm)).backward();
// Pure functions; failure = MOERL_CHECK on shapes or non-positive counts.
#pragma once

#include <ATen/ATen.h>

#include "rl/loss_config.h"

namespace moerl::rl {

struct LossNorm {
  double num_tokens = 0;  // valid (mask = 1) tokens in the global batch
  double num_seqs = 0;    // sequences with at least one valid token in the global batch
  double max_len = 0;     // L_max of seq-mean-token-sum-norm (the generation length budget)

  // Counts of `mask_BL`; max_len <= 0 takes mask.size(1).
  static LossNorm from_mask(const at::Tensor& mask_BL, int64_t max_len = 0);
  // Sum of two partial counts (micro-batches or ranks); max_len must agree.
  LossNorm operator+(const LossNorm& other) const;
};

// Reduces per-token values x_BL (masked by mask_BL) to a scalar:
//   kTokenMean:           sum(x*m) / norm.num_tokens
//   kSeqMeanTokenMean:    sum_i [sum_t x_it m_it / n_i] / norm.num_seqs  (n_i = tokens of row i)
//   kSeqMeanTokenSumNorm: sum(x*m) / (norm.num_seqs * norm.max_len)
// Rows without valid tokens contribute 0. Differentiable in x.
// NOTE: split batches into micro-batches by rows (whole sequences): seq-mean-token-mean
// divides by each row's own token count.
at::Tensor aggregate(const at::Tensor& x_BL, const at::Tensor& mask_BL, LossAgg mode,
                     const LossNorm& norm);

// sum(x*m) / max(sum(m), 1): a local (not global) masked mean, for metrics and whitening.
at::Tensor masked_mean(const at::Tensor& x, const at::Tensor& mask);

// Checks that every tensor in a loss input has the [B, L] shape of the mask.
void check_same_shape(const at::Tensor& x, const at::Tensor& mask_BL, const char* name);

}  // namespace moerl::rl
