// MoE block: router, ep dispatch/combine (autograd), grouped local SwiGLU experts, shared expert.
#include "model/common/moe.h"

#include "base/check.h"
#include "ep/autograd.h"
#include "model/common/layers.h"

namespace moerl::model {

namespace {
LocalExpertsHook g_local_experts_hook = nullptr;
}  // namespace

void set_local_experts_hook(LocalExpertsHook hook) { g_local_experts_hook = hook; }

at::Tensor run_local_experts(const std::vector<ExpertWeights>& experts, const at::Tensor& x_NH,
                             const at::Tensor& topk_idx_NK, const at::Tensor& topk_weight_NK) {
  if (g_local_experts_hook && x_NH.is_cuda()) {
    at::Tensor y = g_local_experts_hook(experts, x_NH, topk_idx_NK, topk_weight_NK);
    if (y.defined()) return y;
  }
  const int64_t N = x_NH.size(0), K = topk_idx_NK.size(1);
  const int64_t num_local = static_cast<int64_t>(experts.size());
  // No work here: zeros that stay on x's graph, so backward still reaches this rank's EP
  // dispatch/combine (collectives: a rank that skipped them would hang the others).
  if (N == 0) return x_NH.mul(0);
  // Group the (row, k) entries by expert with one sort; -1 entries sort first and are skipped.
  at::Tensor flat_idx = topk_idx_NK.reshape({-1});
  at::Tensor order = at::argsort(flat_idx);
  at::Tensor sorted_idx = flat_idx.index_select(0, order);
  at::Tensor counts = at::bincount(sorted_idx.clamp_min(0).add(1), {}, num_local + 1).cpu();
  const int64_t* c = counts.data_ptr<int64_t>();  // c[0]: -1 entries; c[e+1]: expert e
  // The transport carries weights as float32; experts compute in the activations' dtype.
  at::Tensor flat_w = topk_weight_NK.reshape({-1}).to(x_NH.scalar_type());
  std::vector<at::Tensor> outs;
  std::vector<at::Tensor> rows;
  int64_t offset = c[0];
  for (int64_t e = 0; e < num_local; ++e) {
    const int64_t n = c[e + 1];
    if (n == 0) continue;
    at::Tensor entries = order.narrow(0, offset, n);
    offset += n;
    at::Tensor row = at::div(entries, K, "floor");
    const ExpertWeights& w = experts[e];
    at::Tensor y = swiglu(x_NH.index_select(0, row), w.gate_IH, w.up_IH, w.down_HI);
    outs.push_back(y * flat_w.index_select(0, entries).unsqueeze(1));
    rows.push_back(row);
  }
  MOERL_CHECK_EQ(offset, N * K) << "expert ids in recv_topk_idx must be in [-1, " << num_local << ")";
  if (outs.empty()) return x_NH.mul(0);
  return at::zeros_like(x_NH).index_add(0, at::cat(rows), at::cat(outs));
}

at::Tensor router_logits(const MoeWeights& w, const at::Tensor& x_TH, const RouterConfig& cfg) {
  if (cfg.logits_precision == RouterPrecision::kFloat32 && x_TH.scalar_type() != at::kDouble &&
      x_TH.scalar_type() != at::kFloat) {
    return at::linear(x_TH.to(at::kFloat), w.router_EH.to(at::kFloat));
  }
  return at::linear(x_TH, w.router_EH);
}

MoeOutput moe_forward(const MoeWeights& w, const at::Tensor& x_TH, const RouterConfig& cfg, ep::Group& group,
                      const at::Tensor& forced_topk_idx_TK) {
  MOERL_CHECK_EQ(group.num_experts(), cfg.num_experts);
  MOERL_CHECK_EQ(static_cast<int64_t>(w.experts.size()), group.num_local_experts());
  MoeOutput o;
  o.router_logits_TE = router_logits(w, x_TH, cfg);
  route(o.router_logits_TE, cfg, &o.topk_idx_TK, &o.topk_weight_TK, w.score_bias_E, forced_topk_idx_TK);
  if (group.world_size() == 1) {
    // Every expert is local: nothing to route. The experts read x as a one-rank dispatch would
    // hand it over, without its host-side layout of the ids (a device-to-host copy and a host
    // sync per layer on the GPU); the load is counted on the ids' device.
    o.y_TH = run_local_experts(w.experts, x_TH, o.topk_idx_TK, o.topk_weight_TK);
    const at::Tensor ids = o.topk_idx_TK.reshape({-1});
    o.expert_load_E = at::zeros({cfg.num_experts + 1}, ids.options().dtype(at::kLong))
                          .scatter_add_(0, ids.add(1), at::ones_like(ids, at::kLong))
                          .narrow(0, 1, cfg.num_experts);
  } else {
    ep::Layout layout = group.get_dispatch_layout(o.topk_idx_TK, cfg.num_experts);
    o.expert_load_E = layout.num_tokens_per_expert;
    ep::Dispatched d = ep::dispatch_autograd(group, x_TH, o.topk_idx_TK, o.topk_weight_TK, layout);
    at::Tensor y_NH = run_local_experts(w.experts, d.recv_x_NH, d.recv_topk_idx_NK, d.recv_topk_weights_NK);
    o.y_TH = ep::combine_autograd(group, y_NH, d.handle);
  }
  if (w.shared.defined()) o.y_TH = o.y_TH + shared_expert(w.shared, x_TH);
  return o;
}

}  // namespace moerl::model
