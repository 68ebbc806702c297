// KvCache: buffers allocated once at full capacity; prefill rows fanned out (copy_rows), rows
// refilled under per-row cursors (put_rows), and per-row slot writes (write_slots).
#include "model/common/kv_cache.h"

#include <algorithm>
#include <c10/util/Optional.h>

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
  row_fill.clear();
}

KvCache KvCache::row_view(int64_t first, int64_t n) {
  MOERL_CHECK(row_fill.empty() && first >= 0 && n >= 0 && first + n <= batch())
      << "row_view: rows [" << first << ", " << first + n << ") of a cache of " << batch()
      << (row_fill.empty() ? "" : " with per-row cursors");
  KvCache view;
  for (const at::Tensor& t : k) view.k.push_back(t.narrow(0, first, n));
  for (const at::Tensor& t : v) view.v.push_back(t.narrow(0, first, n));
  for (const at::Tensor& t : latent) view.latent.push_back(t.narrow(0, first, n));
  view.valid = valid.narrow(0, first, n);
  view.next_pos = next_pos.narrow(0, first, n);
  view.length = length;
  return view;
}

namespace {

// f(src's buffer, dst's buffer, slot dim) for every layer's keys, values or latents; the
// validity mask and positions are the caller's.
template <class F>
void each_layer_buffer(const KvCache& src, KvCache& dst, const char* what, F f) {
  MOERL_CHECK(src.k.size() == dst.k.size() && src.latent.size() == dst.latent.size())
      << what << ": caches of different layouts";
  for (size_t l = 0; l < dst.k.size(); ++l) {
    f(src.k[l], dst.k[l], 2);
    f(src.v[l], dst.v[l], 2);
  }
  for (size_t l = 0; l < dst.latent.size(); ++l) f(src.latent[l], dst.latent[l], 1);
}

}  // namespace

void KvCache::copy_rows(const KvCache& src, const at::Tensor& rows_B) {
  const int64_t n = src.length;
  MOERL_CHECK(rows_B.dim() == 1 && rows_B.size(0) == batch() && n <= capacity())
      << "copy_rows: " << rows_B.sizes() << " rows of " << n << " slots into a cache of " << batch() << " x "
      << capacity();
  auto take = [&](const at::Tensor& from, const at::Tensor& to, int64_t slot_dim) {
    to.narrow(slot_dim, 0, n).copy_(from.narrow(slot_dim, 0, n).index_select(0, rows_B));
  };
  each_layer_buffer(src, *this, "copy_rows", take);
  valid.zero_();
  take(src.valid, valid, 1);
  next_pos.copy_(src.next_pos.index_select(0, rows_B));
  length = n;
}

void KvCache::put_rows(const KvCache& src, const std::vector<int64_t>& rows) {
  const int64_t n = src.length, k = static_cast<int64_t>(rows.size());
  MOERL_CHECK(!row_fill.empty() && src.batch() == k && n <= capacity())
      << "put_rows: " << k << " rows of " << src.batch() << " x " << n << " slots into a cache of " << batch() << " x "
      << capacity() << (row_fill.empty() ? " without per-row cursors" : "");
  at::Tensor dst = at::tensor(rows, at::kLong).to(valid.device());
  auto put = [&](const at::Tensor& from, const at::Tensor& to, int64_t slot_dim) {
    to.narrow(slot_dim, 0, n).index_copy_(0, dst, from.narrow(slot_dim, 0, n));
  };
  each_layer_buffer(src, *this, "put_rows", put);
  valid.index_fill_(0, dst, false);
  put(src.valid, valid, 1);
  next_pos.index_copy_(0, dst, src.next_pos);
  for (int64_t r : rows) row_fill[r] = n;
  length = *std::max_element(row_fill.begin(), row_fill.end());
}

void KvCache::write_slots(const at::Tensor& buf, int64_t slot_dim, const at::Tensor& slot_B, const at::Tensor& x) {
  c10::List<c10::optional<at::Tensor>> at_slot;  // [b, :, ..., slot_B[b]]
  at_slot.push_back(at::arange(buf.size(0), slot_B.options()));
  for (int64_t d = 1; d < slot_dim; ++d) at_slot.push_back(c10::nullopt);
  at_slot.push_back(slot_B);
  at::Tensor(buf).index_put_(at_slot, x.squeeze(slot_dim));  // a handle: in place on buf
}

}  // namespace moerl::model
