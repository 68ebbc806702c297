// Grouped CPU experts: gather in expert order, per-expert gemms on contiguous slices,
// one weighted scatter; the backward pass mirrors it with preallocated gradient buffers.
#include "model/common/cpu_experts.h"

#include <torch/torch.h>

#include "base/check.h"

namespace moerl::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows [offset, offset + count) of the gathered entries belong to active expert j.
struct Groups {
  std::vector<int64_t> offset, count;
};

// out = a @ b into a view (a row slice or one expert's matrix) of a preallocated buffer.
void mm_into(at::Tensor out, const at::Tensor& a, const at::Tensor& b) { at::mm_out(out, a, b); }

Groups groups_of(const at::Tensor& counts_J) {
  Groups g;
  const int64_t* c = counts_J.data_ptr<int64_t>();
  int64_t off = 0;
  for (int64_t j = 0; j < counts_J.numel(); ++j) {
    g.offset.push_back(off);
    g.count.push_back(c[j]);
    off += c[j];
  }
  return g;
}

class CpuExpertsFn : public torch::autograd::Function<CpuExpertsFn> {
 public:
  // x [N,H]; w [N,K] combine weights; gate/up [J,I,H], down [J,H,I]: the active experts;
  // rows [M] token of each gathered entry, entries [M] its flat (n*K+k) slot, counts [J].
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w, const at::Tensor& gate,
                               const at::Tensor& up, const at::Tensor& down, const at::Tensor& rows,
                               const at::Tensor& entries, const at::Tensor& counts) {
    const Groups grp = groups_of(counts);
    const int64_t M = rows.size(0), I = gate.size(1), H = x.size(1);
    at::Tensor xs = x.index_select(0, rows);                                      // [M,H]
    at::Tensor ws = w.reshape({-1}).index_select(0, entries).to(x.scalar_type());  // [M]
    at::Tensor g = at::empty({M, I}, x.options()), u = at::empty({M, I}, x.options());
    for (size_t j = 0; j < grp.count.size(); ++j) {
      at::Tensor xj = xs.narrow(0, grp.offset[j], grp.count[j]);
      mm_into(g.narrow(0, grp.offset[j], grp.count[j]), xj, gate[j].t());
      mm_into(u.narrow(0, grp.offset[j], grp.count[j]), xj, up[j].t());
    }
    at::Tensor a = at::silu(g) * u;
    at::Tensor y = at::empty({M, H}, x.options());  // unweighted expert outputs
    for (size_t j = 0; j < grp.count.size(); ++j) {
      mm_into(y.narrow(0, grp.offset[j], grp.count[j]), a.narrow(0, grp.offset[j], grp.count[j]), down[j].t());
    }
    at::Tensor out = at::zeros_like(x);
    out.index_add_(0, rows, y * ws.unsqueeze(1));
    ctx->save_for_backward({xs, ws, g, u, y, gate, up, down, rows, entries, counts});
    ctx->saved_data["n"] = x.size(0);
    ctx->saved_data["w_dtype"] = static_cast<int64_t>(w.scalar_type());
    ctx->saved_data["w_shape"] = w.sizes().vec();
    return {out};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    variable_list s = ctx->get_saved_variables();
    const at::Tensor &xs = s[0], &ws = s[1], &g = s[2], &u = s[3], &y = s[4], &gate = s[5], &up = s[6],
                     &down = s[7], &rows = s[8], &entries = s[9], &counts = s[10];
    const Groups grp = groups_of(counts);
    const int64_t N = ctx->saved_data["n"].toInt(), M = rows.size(0), I = g.size(1), H = xs.size(1);
    const auto w_dtype = static_cast<at::ScalarType>(ctx->saved_data["w_dtype"].toInt());
    const std::vector<int64_t> w_shape = ctx->saved_data["w_shape"].toIntVector();
    at::Tensor dys = grads[0].contiguous().index_select(0, rows);  // d(weighted output) [M,H]
    at::Tensor dw = at::zeros({N * w_shape.back()}, dys.options().dtype(w_dtype));
    dw.index_copy_(0, entries, (dys * y).sum(1).to(w_dtype));
    at::Tensor dy = dys * ws.unsqueeze(1);
    at::Tensor sg = at::sigmoid(g);
    at::Tensor act = g * sg;  // silu(g)
    at::Tensor a = act * u;
    at::Tensor da = at::empty({M, I}, xs.options());
    at::Tensor dgate = at::empty_like(gate), dup = at::empty_like(up), ddown = at::empty_like(down);
    for (size_t j = 0; j < grp.count.size(); ++j) {
      const int64_t o = grp.offset[j], c = grp.count[j];
      mm_into(da.narrow(0, o, c), dy.narrow(0, o, c), down[j]);
      mm_into(ddown[j], dy.narrow(0, o, c).t(), a.narrow(0, o, c));
    }
    at::Tensor dg = da * u * (sg * (1 + g * (1 - sg)));  // silu'(g) = s (1 + g (1 - s))
    at::Tensor du = da * act;
    at::Tensor dxs = at::empty({M, H}, xs.options());
    for (size_t j = 0; j < grp.count.size(); ++j) {
      const int64_t o = grp.offset[j], c = grp.count[j];
      at::Tensor dgj = dg.narrow(0, o, c), duj = du.narrow(0, o, c), xj = xs.narrow(0, o, c);
      mm_into(dgate[j], dgj.t(), xj);
      mm_into(dup[j], duj.t(), xj);
      at::Tensor dxj = dxs.narrow(0, o, c);
      mm_into(dxj, dgj, gate[j]);
      dxj.addmm_(duj, up[j]);
    }
    at::Tensor dx = at::zeros({N, H}, xs.options());
    dx.index_add_(0, rows, dxs);
    return {dx, dw.view(w_shape), dgate, dup, ddown, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

bool cpu_experts_apply(const at::Tensor& x_NH) {
  const at::ScalarType t = x_NH.scalar_type();
  return x_NH.device().is_cpu() && (t == at::kFloat || t == at::kDouble);
}

at::Tensor cpu_experts(const std::vector<ExpertWeights>& experts, const at::Tensor& x_NH,
                       const at::Tensor& topk_idx_NK, const at::Tensor& topk_weight_NK) {
  const int64_t N = x_NH.size(0), K = topk_idx_NK.size(1);
  const int64_t E = static_cast<int64_t>(experts.size());
  if (N == 0) return at::zeros_like(x_NH);
  // Group the (row, k) entries by expert with one sort; -1 entries sort first and are skipped.
  at::Tensor flat_idx = topk_idx_NK.reshape({-1});
  at::Tensor order = at::argsort(flat_idx);
  at::Tensor counts = at::bincount(flat_idx.clamp_min(-1).add(1), {}, E + 1);
  MOERL_CHECK_EQ(counts.size(0), E + 1) << "expert ids in recv_topk_idx must be in [-1, " << E << ")";
  const int64_t* c = counts.data_ptr<int64_t>();  // c[0]: -1 entries; c[e+1]: expert e
  std::vector<at::Tensor> gate, up, down;
  std::vector<int64_t> active_counts;
  for (int64_t e = 0; e < E; ++e) {
    if (c[e + 1] == 0) continue;  // an idle expert stays out of the graph (no gradient), as in the loop
    gate.push_back(experts[e].gate_IH);
    up.push_back(experts[e].up_IH);
    down.push_back(experts[e].down_HI);
    active_counts.push_back(c[e + 1]);
  }
  if (active_counts.empty()) return at::zeros_like(x_NH);
  at::Tensor entries = order.narrow(0, c[0], N * K - c[0]).contiguous();
  at::Tensor rows = at::div(entries, K, "floor");
  at::Tensor counts_J = at::tensor(active_counts, at::kLong);
  return CpuExpertsFn::apply(x_NH, topk_weight_NK, at::stack(gate), at::stack(up), at::stack(down), rows, entries,
                             counts_J)[0];
}

}  // namespace moerl::model
