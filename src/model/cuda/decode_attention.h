// Attention of one new token per row over a KV cache under its validity mask, in one kernel
// (the decode step's GQA; model/cuda/decode_step.cc). In place of two batched products and
// five element-wise passes over float32 scores [B,Hq,S], each CTA takes one row and one KV
// head, reads that head's keys and values once, and keeps the scores of a chunk of positions
// in shared memory with an online softmax across chunks (scores and probabilities in float32,
// q.k on bf16 tensor cores).
//
//   decode_attention(q, k_cache, v_cache, valid, slot_B, B, Hq, Hkv, S, 128, 1 / sqrt(128.f), out, stream);
//
// q: bf16 [B, Hq, D] (query heads h*G .. h*G+G-1 share KV head h, G = Hq / Hkv); k_cache and
// v_cache: bf16 [B, Hkv, S, D]; valid: bool [B, S] (false: the position is not attended);
// last_slot: int64 [B] on the device, row b's last slot that may be valid (the decode step's
// write slot: a row's cursor), so only positions 0..last_slot[b] are read, which at RL answer
// lengths is often half the cache or less; null: all S. out: bf16 [B, Hq, D]; a row with no
// valid position gets zeros. Pointers 16-byte aligned.
// Enqueued on `stream`, no sync; cudaErrorInvalidValue for sizes it does not take
// (decode_attention_fits).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace moerl::model::cuda {

// D = 128 and G = Hq / Hkv in 1..8 (an integer).
bool decode_attention_fits(int64_t num_heads, int64_t num_kv_heads, int64_t head_dim);

cudaError_t decode_attention(const void* q, const void* k_cache, const void* v_cache, const bool* valid,
                             const int64_t* last_slot, int64_t batch, int64_t num_heads, int64_t num_kv_heads,
                             int64_t positions, int64_t head_dim, float scale, void* out, cudaStream_t stream);

}  // namespace moerl::model::cuda
