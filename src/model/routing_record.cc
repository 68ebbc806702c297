// RoutingRecorder: stacks the per-layer top-k ids of one forward and appends each row's slots.
#include "model/routing_record.h"

#include "base/check.h"

namespace moerl::model {

void RoutingRecorder::add(const std::vector<LayerRouting>& routing, int64_t T, const std::vector<int64_t>& first) {
  if (routing.empty()) return;
  const int64_t B = static_cast<int64_t>(rows_.size());
  MOERL_CHECK_EQ(static_cast<int64_t>(first.size()), B);
  std::vector<at::Tensor> per_layer;
  for (const LayerRouting& r : routing) per_layer.push_back(r.topk_idx_TK);
  // [B*T, L, K] -> host int32, one copy
  at::Tensor ids = at::stack(per_layer, 1).to(at::kInt).cpu().contiguous();
  MOERL_CHECK_EQ(ids.size(0), B * T);
  const int64_t per_token = ids.size(1) * ids.size(2);
  const int32_t* p = ids.data_ptr<int32_t>();
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = first[b]; t < T; ++t) {
      const int32_t* src = p + (b * T + t) * per_token;
      rows_[b].insert(rows_[b].end(), src, src + per_token);
    }
  }
}

}  // namespace moerl::model
