// Key/value cache for batched generation, preallocated per layer at full capacity and
// filled slot by slot. Two layouts:
//   kHeads  (GQA: qwen*_moe, mixtral): k and v [B, Hkv, Tmax, D] per layer;
//   kLatent (MLA: deepseek_v3): latent [B, Tmax, kv_lora_rank + qk_rope_head_dim] per layer,
//           the normed compressed kv followed by the rotated shared rope key, which is what
//           MLA keeps per token (keys and values are expanded from it, or absorbed; see
//           mla_attention.h).
// All rows share the slot cursor (`length`); `valid` marks which slots hold real tokens
// (left padding and rows that already stopped hold pad slots), `next_pos` is each row's next
// position id (its own token count).
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
  int64_t length = 0;              // slots filled so far (same for every row)

  KvCache() = default;
  KvCache(int64_t num_layers, int64_t batch, int64_t capacity, const KvCacheShape& shape,
          at::TensorOptions options);

  int64_t batch() const { return valid.size(0); }
  int64_t capacity() const { return valid.size(1); }
  // Forget everything (keeps the buffers).
  void reset();
  // Row b takes row rows_B[b] of src: its filled slots, validity and positions (a shared
  // prefill fans out this way). src has the same layers and kind; capacity >= src.length.
  void copy_rows(const KvCache& src, const at::Tensor& rows_B);
};

}  // namespace moerl::model
