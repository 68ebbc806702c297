// KvCache allocation. The per-layer buffers are allocated once, at their full capacity.
#include "model/common/kv_cache.h"

#include "base/check.h"

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

void KvCache::copy_rows(const KvCache& src, const at::Tensor& rows_B) {
  const int64_t n = src.length;
  MOERL_CHECK(src.k.size() == k.size() && src.latent.size() == latent.size())
      << "copy_rows: caches of different layouts";
  MOERL_CHECK(rows_B.dim() == 1 && rows_B.size(0) == batch() && n <= capacity())
      << "copy_rows: " << rows_B.sizes() << " rows of " << n << " slots into a cache of " << batch() << " x "
      << capacity();
  auto take = [&](const at::Tensor& from, const at::Tensor& to, int64_t slot_dim) {
    to.narrow(slot_dim, 0, n).copy_(from.narrow(slot_dim, 0, n).index_select(0, rows_B));
  };
  for (size_t l = 0; l < k.size(); ++l) {
    take(src.k[l], k[l], 2);
    take(src.v[l], v[l], 2);
  }
  for (size_t l = 0; l < latent.size(); ++l) take(src.latent[l], latent[l], 1);
  valid.zero_();
  take(src.valid, valid, 1);
  next_pos.copy_(src.next_pos.index_select(0, rows_B));
  length = n;
}

}  // namespace moerl::model
