// The device send plan of ep/torch/device_plan.h: masks, then nonzero() for explicit rows.
#include "ep/torch/device_plan.h"

namespace moerl::ep::detail {

at::Tensor owner_rank(const at::Tensor& idx, int64_t experts_per_rank) {
  return at::where(idx.ge(0), idx.div(experts_per_rank, "floor"), at::full_like(idx, -1));
}

std::vector<int64_t> host_values(const at::Tensor& t) {
  at::Tensor c = t.to(at::kCPU, at::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

GroupMask group_mask(const at::Tensor& idx, int64_t num_experts, int num_ranks, Mode mode) {
  const int64_t El = num_experts / num_ranks;
  const bool ll = mode == Mode::kLowLatency;
  const int64_t G = ll ? num_experts : num_ranks;
  GroupMask m;
  const at::Tensor valid = idx.ge(0).logical_and(idx.lt(num_experts));
  m.num_bad = idx.lt(-1).logical_or(idx.ge(num_experts)).sum();
  m.key_TK = at::where(valid, ll ? idx : idx.div(El, "floor"), at::full_like(idx, -1)).contiguous();
  m.group_mask = m.key_TK.unsqueeze(0).eq(at::arange(G, idx.options()).view({G, 1, 1})).any(2);
  m.group_rows = m.group_mask.sum(1);
  return m;
}

DevicePlan device_plan(const at::Tensor& idx, const at::Tensor& w, int64_t num_experts, int num_ranks, Mode mode) {
  const int64_t El = num_experts / num_ranks;
  DevicePlan p;
  static_cast<GroupMask&>(p) = group_mask(idx, num_experts, num_ranks, mode);
  at::Tensor nz = p.group_mask.nonzero();
  p.row_group = nz.select(1, 0).contiguous();
  p.row_token = nz.select(1, 1).contiguous();
  at::Tensor keep = p.key_TK.index_select(0, p.row_token).eq(p.row_group.unsqueeze(1));
  at::Tensor ids = idx.index_select(0, p.row_token);
  p.row_idx = at::where(keep, ids.remainder(El), at::full_like(ids, -1)).to(at::kInt).contiguous();
  at::Tensor ws = w.index_select(0, p.row_token);
  p.row_w = at::where(keep, ws, at::zeros_like(ws)).to(at::kFloat).contiguous();
  return p;
}

}  // namespace moerl::ep::detail
