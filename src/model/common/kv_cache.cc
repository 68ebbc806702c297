// KvCache allocation. The per-layer buffers are allocated once, at their full capacity.
#include "model/common/kv_cache.h"

namespace moerl::model {

KvCache::KvCache(int64_t num_layers, int64_t batch, int64_t capacity, const KvCacheShape& shape,
                 at::TensorOptions options) {
  for (int64_t i = 0; i < num_layers; ++i) {
    if (shape.kind == KvCacheKind::kLatent) {
      latent.push_back(at::zeros({batch, capacity, shape.latent_dim}, options));
    } else {
      k.push_back(at::zeros({batch, shape.num_kv_heads, capacity, shape.head_dim}, options));
      v.push_back(at::zeros({batch, shape.num_kv_heads, capacity, shape.head_dim}, options));
    }
  }
  auto dev = options.device();
  valid = at::zeros({batch, capacity}, at::TensorOptions().dtype(at::kBool).device(dev));
  next_pos = at::zeros({batch}, at::TensorOptions().dtype(at::kLong).device(dev));
}

void KvCache::reset() {
  valid.zero_();
  next_pos.zero_();
  length = 0;
}

}  // namespace moerl::model
