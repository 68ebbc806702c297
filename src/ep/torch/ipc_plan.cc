// ipc_plan of ep/torch/ipc_plan.h: tensor ops only, all on the ids' device.
#include "ep/torch/ipc_plan.h"

#include <algorithm>

#include "ep/torch/device_plan.h"

namespace moerl::ep::detail {

std::shared_ptr<IpcState> ipc_plan(const at::Tensor& topk_idx_TK, const at::Tensor& topk_weights_TK,
                                   int64_t num_experts, int num_ranks, Mode mode, int64_t max_rows) {
  const at::Tensor idx = topk_idx_TK.contiguous(), w = topk_weights_TK.to(at::kFloat).contiguous();
  const int64_t T = idx.size(0), K = idx.size(1), R = num_ranks, E = num_experts, El = E / R;
  const bool ll = mode == Mode::kLowLatency;
  const at::TensorOptions lopt = idx.options().dtype(at::kLong);
  GroupMask m = group_mask(idx, E, num_ranks, mode);
  const int64_t G = m.group_mask.size(0);
  auto st = std::make_shared<IpcState>();
  st->mode = mode;
  st->num_ranks = num_ranks;
  st->num_tokens = T;
  auto& rt = st->routing;
  rt.num_ranks = num_ranks;
  rt.num_tokens = T;
  rt.topk = K;
  rt.experts_per_rank = El;
  rt.per_expert_rows = ll;
  // Per destination and local expert: the rows (low_latency: the groups are the experts) or the
  // tokens the expert serves (normal: each token once; slots without a group count at column E).
  at::Tensor per_expert_RE =
      ll ? m.group_rows.view({R, El})
         : at::zeros({T, E + 1}, lopt)
               .scatter_(1, at::where(m.key_TK.ge(0), idx, at::full_like(idx, E)), 1)
               .narrow(1, 0, E)
               .sum(0)
               .view({R, El});
  st->rows_R = ll ? per_expert_RE.sum(1) : m.group_rows;
  st->first_R = at::cumsum(st->rows_R, 0) - st->rows_R;
  st->row_GT = m.group_mask.reshape(-1).to(at::kLong).cumsum(0) - 1;
  st->header_RC = at::cat({st->rows_R.view({R, 1}), per_expert_RE}, 1).contiguous();
  st->key_TK = m.key_TK;
  st->idx_TK = idx;
  st->w_TK = w;
  st->num_bad = m.num_bad;
  // Combine: token t's rows in (rank, expert) order, each at d * max_rows + its number among
  // d's rows. Slots of (g, t) pairs without a row go to a spare column P, dropped after.
  const int64_t P = std::max<int64_t>(1, std::min(K, G));
  at::Tensor g = at::arange(G, lopt), d_G = ll ? g.div(El, "floor") : g;
  at::Tensor code_GT = d_G.view({G, 1}) * max_rows + (st->row_GT.view({G, T}) - st->first_R.index_select(0, d_G).view({G, 1}));
  at::Tensor slot_GT = at::where(m.group_mask, m.group_mask.to(at::kLong).cumsum(0) - 1, at::full_like(code_GT, P));
  st->combine_code_TP = at::full({T, P + 1}, -1, lopt)
                            .scatter_(1, slot_GT.t().contiguous(), code_GT.t().contiguous())
                            .narrow(1, 0, P)
                            .contiguous();
  return st;
}

}  // namespace moerl::ep::detail
