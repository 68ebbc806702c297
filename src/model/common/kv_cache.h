// Key/value cache for batched generation, preallocated per layer at full capacity and
// filled slot by slot. Two layouts:
//   kHeads  (GQA: qwen*_moe, mixtral): k and v [B, Hkv, Tmax, D] per layer;
//   kLatent (MLA: deepseek_v3): latent [B, Tmax, kv_lora_rank + qk_rope_head_dim] per layer,
//           the normed compressed kv followed by the rotated shared rope key, which is what
//           MLA keeps per token (keys and values are expanded from it, or absorbed; see
//           mla_attention.h).
// A prefill writes every row from the shared slot cursor (`length`); `valid` marks which
// slots hold real tokens (left padding and rows that already stopped hold pad slots),
// `next_pos` is each row's next position id (its own token count). Decoding can switch to
// per-row cursors (`row_fill`): each row then writes its next token at its own slot, so a
// finished row can be refilled with another sequence (continuous batching, put_rows) while
// the others go on.
//
//   KvCache cache = model.make_cache(/*batch=*/64, /*capacity=*/prompt_len + max_new);
//   model.forward({prompt_ids, prompt_mask, {}, &cache});   // prefill
//   model.forward({next_ids_B1, {}, {}, &cache});          // one decode step
//
// Not thread-safe; one forward at a time. Overflowing `capacity` is a moerl::Error.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace moerl::model {

enum class KvCacheKind { kHeads, kLatent };

struct KvCacheShape {
  KvCacheKind kind = KvCacheKind::kHeads;
  int64_t num_kv_heads = 0;  // kHeads
  int64_t head_dim = 0;      // kHeads
  int64_t latent_dim = 0;    // kLatent
};

struct KvCache {
  std::vector<at::Tensor> k;       // kHeads: per layer [B,Hkv,Tmax,D]
  std::vector<at::Tensor> v;       // kHeads: per layer [B,Hkv,Tmax,D]
  std::vector<at::Tensor> latent;  // kLatent: per layer [B,Tmax,C]
  at::Tensor valid;                // [B,Tmax] bool: slot holds a real token
  at::Tensor next_pos;             // [B] int64: position id of each row's next token
  int64_t length = 0;              // slots in use: the shared cursor, or max(row_fill)
  // Per-row cursors (host side; empty: the shared cursor). Set, a forward takes one token per
  // row, writes row b's at slot row_fill[b] and advances it where the row's mask is 1; keys
  // are read over [0, length) under `valid` alone (no slot after a row's cursor is valid).
  std::vector<int64_t> row_fill;

  KvCache() = default;
  KvCache(int64_t num_layers, int64_t batch, int64_t capacity, const KvCacheShape& shape,
          at::TensorOptions options);

  int64_t batch() const { return valid.size(0); }
  int64_t capacity() const { return valid.size(1); }
  // Forget everything (keeps the buffers).
  void reset();
  // Rows [first, first + n) as a cache of their own that shares this one's memory (a prefill
  // in row chunks forwards into each). Shared cursor only; the view's cursor starts at ours.
  KvCache row_view(int64_t first, int64_t n);
  // Row b takes row rows_B[b] of src: its filled slots, validity and positions (a shared
  // prefill fans out this way). src has the same layers and kind; capacity >= src.length.
  void copy_rows(const KvCache& src, const at::Tensor& rows_B);
  // Switches to per-row cursors, every row at the shared cursor.
  void use_row_cursors() { row_fill.assign(batch(), length); }
  // Per-row cursors: row rows[i] forgets its sequence and takes row i of src (a prefill of
  // the waiting prompts), slots [0, src.length); its cursor moves to src.length.
  void put_rows(const KvCache& src, const std::vector<int64_t>& rows);
  // Writes x (size 1 along slot_dim, B first) into buf at slot slot_B[b] of each row b.
  // Static shapes, no host sync: usable inside a CUDA graph.
  static void write_slots(const at::Tensor& buf, int64_t slot_dim, const at::Tensor& slot_B, const at::Tensor& x);
};

}  // namespace moerl::model
