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

// A tensor aliasing `base`'s storage at `offset` elements, shaped like `like`, that is not an
// autograd view (so the optimizer may detach_ it in place).
at::Tensor alias(const at::Tensor& base, int64_t offset, const at::Tensor& like) {
  at::Tensor t = at::empty({0}, base.options());
  t.set_(base.storage(), base.storage_offset() + offset, like.sizes(), like.strides());
  return t;
}

// The leaves' packed gradient buffers: the ones their grads already alias, else new ones
// holding whatever the grads held (zeros where undefined), which the grads then alias.
PackedExperts grad_buffers(variable_list& leaves) {
  std::vector<ExpertWeights> grads;
  for (size_t i = 0; i + 2 < leaves.size(); i += 3) {
    grads.push_back({leaves[i].grad(), leaves[i + 1].grad(), leaves[i + 2].grad()});
  }
  PackedExperts g = packed_view(grads);
  if (g.w13_E2IH.defined()) return g;
  at::NoGradGuard no_grad;
  const at::Tensor& g0 = leaves[0];
  const int64_t E = static_cast<int64_t>(grads.size()), I = g0.size(0), H = g0.size(1);
  g.w13_E2IH = at::zeros({E, 2 * I, H}, g0.options().requires_grad(false));
  g.w2_EHI = at::zeros({E, H, I}, g0.options().requires_grad(false));
  for (int64_t e = 0; e < E; ++e) {
    at::Tensor* leaf = &leaves[static_cast<size_t>(3 * e)];
    const int64_t offsets[3] = {e * 2 * I * H, e * 2 * I * H + I * H, e * H * I};
    for (int j = 0; j < 3; ++j) {
      const at::Tensor& base = j < 2 ? g.w13_E2IH : g.w2_EHI;
      at::Tensor a = alias(base, offsets[j], leaf[j]);
      if (leaf[j].grad().defined()) a.copy_(leaf[j].grad());
      leaf[j].mutable_grad() = a;
    }
  }
  return g;
}

struct PackedGradFn : torch::autograd::Function<PackedGradFn> {
  static variable_list forward(AutogradContext* ctx, at::TensorList leaves) {
    PackedExperts p = packed_view(regroup(leaves));
    ctx->saved_data["n"] = static_cast<int64_t>(leaves.size());
    // The leaves themselves, to find their grads in backward; not saved tensors (no version
    // check: the optimizer updates them in place after the backward).
    ctx->saved_data["leaves"] = c10::List<at::Tensor>(std::vector<at::Tensor>(leaves.begin(), leaves.end()));
    return {p.w13_E2IH, p.w2_EHI};
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    c10::List<at::Tensor> list = ctx->saved_data["leaves"].toTensorList();
    variable_list leaves = list.vec();
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
