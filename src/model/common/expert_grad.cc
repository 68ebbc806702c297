// packed_for_grad: a custom autograd function over a layer's 3E expert parameters whose
// outputs alias their packed storage and whose backward adds into one packed grad buffer.
#include "model/common/expert_grad.h"

#include <torch/torch.h>

namespace moerl::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// experts[e] = {gate, up, down} from a flat list of 3E tensors.
std::vector<ExpertWeights> regroup(at::TensorList flat) {
  std::vector<ExpertWeights> out;
  for (size_t i = 0; i + 2 < flat.size(); i += 3) out.push_back({flat[i], flat[i + 1], flat[i + 2]});
  return out;
}

// The leaves' packed gradient buffers: the ones their grads already alias, else new ones
// (pack_experts' layout) holding whatever the grads held, zeros where undefined, which the
// grads then alias as plain tensors (detached: the optimizer may detach_ them in place).
PackedExperts grad_buffers(const variable_list& leaves) {
  variable_list grads;
  for (const at::Tensor& l : leaves) grads.push_back(l.grad());
  if (PackedExperts g = packed_view(regroup(grads)); g.w13_E2IH.defined()) return g;
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) grads[i] = at::zeros_like(leaves[i], leaves[i].options().requires_grad(false));
  }
  variable_list views;
  for (const ExpertWeights& v : pack_experts(regroup(grads))) views.insert(views.end(), {v.gate_IH, v.up_IH, v.down_HI});
  for (size_t i = 0; i < leaves.size(); ++i) leaves[i].mutable_grad() = views[i].detach();
  return packed_view(regroup(views));
}

struct PackedGradFn : torch::autograd::Function<PackedGradFn> {
  static variable_list forward(AutogradContext* ctx, at::TensorList leaves) {
    PackedExperts p = packed_view(regroup(leaves));
    // The leaves themselves, to find their grads in backward; not saved tensors (no version
    // check: the optimizer updates them in place after the backward).
    ctx->saved_data["leaves"] = c10::List<at::Tensor>(std::vector<at::Tensor>(leaves.begin(), leaves.end()));
    return {p.w13_E2IH, p.w2_EHI};
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    c10::List<at::Tensor> list = ctx->saved_data["leaves"].toTensorList();
    const variable_list leaves = list.vec();
    PackedExperts buf = grad_buffers(leaves);
    at::NoGradGuard no_grad;
    if (g[0].defined()) buf.w13_E2IH.add_(g[0]);
    if (g[1].defined()) buf.w2_EHI.add_(g[1]);
    return variable_list(leaves.size());  // accumulated above: nothing for AccumulateGrad
  }
};

}  // namespace

PackedExperts packed_for_grad(const std::vector<ExpertWeights>& experts) {
  PackedExperts p = packed_view(experts);
  if (!p.w13_E2IH.defined()) return p;
  variable_list leaves;
  size_t trained = 0;
  for (const ExpertWeights& e : experts) {
    for (const at::Tensor* t : {&e.gate_IH, &e.up_IH, &e.down_HI}) {
      leaves.push_back(*t);
      trained += t->requires_grad() ? 1 : 0;
    }
  }
  if (trained == 0 || !at::GradMode::is_enabled()) return p;
  if (trained != leaves.size()) return {};  // some frozen: the caller's stack gives each its own grad
  variable_list out = PackedGradFn::apply(at::TensorList(leaves));  // a TensorList: each tensor an input
  return {out[0], out[1]};
}

}  // namespace moerl::model
