// contiguous_runs: sort by address within a storage, cut where the next tensor does not start
// at the previous one's end.
#include "train/tensor_runs.h"

#include <algorithm>

namespace moerl::train {

namespace {

const char* byte_ptr(const at::Tensor& t) { return static_cast<const char*>(t.data_ptr()); }

const char* end_ptr(const at::Tensor& t) { return byte_ptr(t) + t.numel() * static_cast<int64_t>(t.element_size()); }

bool joins(const at::Tensor& prev, const at::Tensor& next) {
  return prev.is_contiguous() && next.is_contiguous() && next.scalar_type() == prev.scalar_type() &&
         next.device() == prev.device() && next.storage().data() == prev.storage().data() &&
         byte_ptr(next) == end_ptr(prev);
}

}  // namespace

std::vector<TensorRun> contiguous_runs(const std::vector<at::Tensor>& ts) {
  std::vector<size_t> order;
  for (size_t i = 0; i < ts.size(); ++i) {
    if (ts[i].defined()) order.push_back(i);
  }
  // Tensors of one storage next to each other, in address order (storages in any order).
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const void* sa = ts[a].storage().data();
    const void* sb = ts[b].storage().data();
    if (sa != sb) return std::less<const void*>()(sa, sb);
    return std::less<const char*>()(byte_ptr(ts[a]), byte_ptr(ts[b]));
  });
  std::vector<TensorRun> runs;
  for (size_t k = 0; k < order.size();) {
    TensorRun r;
    const at::Tensor& first = ts[order[k]];
    int64_t n = 0;
    size_t j = k;
    do {
      r.members.push_back(order[j]);
      r.offset.push_back(n);
      n += ts[order[j]].numel();
      ++j;
    } while (j < order.size() && first.numel() > 0 && joins(ts[order[j - 1]], ts[order[j]]));
    r.flat = !first.is_contiguous() ? first.detach()
                                    : first.detach().as_strided({n}, {1}, first.storage_offset());
    runs.push_back(std::move(r));
    k = j;
  }
  // Runs in the order of their first tensor in `ts`, not by address: sums over runs must not
  // depend on where the allocator put things.
  std::sort(runs.begin(), runs.end(), [](const TensorRun& a, const TensorRun& b) {
    return *std::min_element(a.members.begin(), a.members.end()) < *std::min_element(b.members.begin(), b.members.end());
  });
  return runs;
}

std::vector<at::Tensor> views_of(const at::Tensor& flat, const TensorRun& run, const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  out.reserve(run.members.size());
  for (size_t i = 0; i < run.members.size(); ++i) {
    const at::Tensor& t = ts[run.members[i]];
    out.push_back(flat.narrow(0, run.offset[i], t.numel()).view(t.sizes()));
  }
  return out;
}

bool same_tiling(const TensorRun& a, const std::vector<TensorRun>& b) {
  if (b.size() != 1 || a.flat.dim() != 1 || b[0].flat.dim() != 1 || b[0].offset != a.offset) return false;
  for (size_t i = 0; i < b[0].members.size(); ++i) {
    if (b[0].members[i] != i) return false;
  }
  return true;
}

at::Tensor sum_of_squares(const at::Tensor& x) {
  constexpr int64_t kChunk = int64_t{1} << 24;
  const at::Tensor flat = x.reshape({-1});
  if (flat.numel() <= kChunk) return flat.to(at::kDouble).pow(2).sum();
  at::Tensor total = at::zeros({}, x.options().dtype(at::kDouble));
  for (int64_t s = 0; s < flat.numel(); s += kChunk) {
    total.add_(flat.narrow(0, s, std::min(kChunk, flat.numel() - s)).to(at::kDouble).pow(2).sum());
  }
  return total;
}

}  // namespace moerl::train
