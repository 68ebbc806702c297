// One token per row from float32 logits [R, V] in one pass over each row (the CUDA-graph
// decode loop's sampling, model/cuda/fast_generate.cc). In place of ~15 passes of at:: ops
// over [R, V] (two log_softmax, the Gumbel noise's rand, clamp and two logs, the subtraction,
// argmax, gathers): ~3 GB a step at batch 256 and vocab 151936, about 1 ms on an H200, as
// long as a whole decode step of a 1-layer model.
//
// Greedy: the first index of the row's maximum. Otherwise Gumbel-max at temperature T:
// argmax over v of x_v / T + g_v, g = -log(-log(u)), u in (0, 1) from Philox4x32-10 keyed by
// `seed`, counter (v / 4, row, draw, draw >> 32), one of its four outputs per v. The same
// (seed, draw) gives the same tokens; the caller counts draws (one per call).
// Outputs per row: token (int64), logprob = log_softmax(x)[token], sample_logprob =
// log_softmax(x / T)[token] (0 when greedy), as fast_generate's at:: sampling gives them.
//
//   sample_rows(logits.data_ptr<float>(), R, V, greedy, 0.7f, seed, draw++, tok, lp, slp, stream);
//
// logits: contiguous, V >= 1; a row's values finite (-inf is skipped). Enqueued on `stream`,
// no sync; cudaErrorInvalidValue for rows < 1, vocab < 1 or temperature <= 0 (not greedy).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace moerl::model::cuda {

cudaError_t sample_rows(const float* logits, int64_t rows, int64_t vocab, bool greedy, float temperature, uint64_t seed,
                        uint64_t draw, int64_t* token, float* logprob, float* sample_logprob, cudaStream_t stream);

}  // namespace moerl::model::cuda
