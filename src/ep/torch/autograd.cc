// torch::autograd::Function wrappers for dispatch and combine. The Handle travels in
// ctx->saved_data as a capsule so backward reuses the forward's routing (cached dispatch).
#include "ep/autograd.h"

#include <torch/torch.h>

namespace moerl::ep {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct SavedRouting : torch::CustomClassHolder {
  Group* group = nullptr;
  Handle handle;
  at::Tensor recv_topk_idx_NK;
  at::ScalarType weights_dtype = at::kFloat;
  bool weights_need_grad = false;
};

c10::intrusive_ptr<SavedRouting> saved(AutogradContext* ctx) {
  return c10::static_intrusive_pointer_cast<SavedRouting>(ctx->saved_data["routing"].toCapsule());
}

class DispatchFn : public torch::autograd::Function<DispatchFn> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& topk_weights,
                               const at::Tensor& topk_idx, Group* group, const Layout* layout,
                               Dispatched* out) {
    *out = group->dispatch(x, topk_idx, topk_weights, *layout);
    auto s = c10::make_intrusive<SavedRouting>();
    s->group = group;
    s->handle = out->handle;
    s->recv_topk_idx_NK = out->recv_topk_idx_NK;
    s->weights_dtype = topk_weights.scalar_type();
    s->weights_need_grad = topk_weights.requires_grad();
    ctx->saved_data["routing"] = c10::IValue::make_capsule(s);
    ctx->mark_non_differentiable({out->recv_topk_idx_NK});
    return {out->recv_x_NH, out->recv_topk_idx_NK, out->recv_topk_weights_NK};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto s = saved(ctx);
    at::Tensor grad_x = s->group->combine(grads[0].contiguous(), s->handle);
    at::Tensor grad_w;
    if (s->weights_need_grad) {
      // Slots not routed to this rank are constant 0 in recv_topk_weights: no gradient.
      at::Tensor g = grads[2].to(at::kFloat).masked_fill(s->recv_topk_idx_NK.lt(0), 0.f).contiguous();
      grad_w = s->group->combine(g, s->handle).to(s->weights_dtype);
    }
    return {grad_x, grad_w, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

class CombineFn : public torch::autograd::Function<CombineFn> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& y, Group* group,
                               const Handle* handle) {
    auto s = c10::make_intrusive<SavedRouting>();
    s->group = group;
    s->handle = *handle;
    ctx->saved_data["routing"] = c10::IValue::make_capsule(s);
    return {group->combine(y, *handle)};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto s = saved(ctx);
    Dispatched d = s->group->dispatch(grads[0].contiguous(), at::Tensor(), at::Tensor(), Layout{}, &s->handle);
    return {d.recv_x_NH, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

Dispatched dispatch_autograd(Group& group, const at::Tensor& x_TH, const at::Tensor& topk_idx_TK,
                             const at::Tensor& topk_weights_TK, const Layout& layout) {
  Dispatched out;
  variable_list r = DispatchFn::apply(x_TH, topk_weights_TK, topk_idx_TK, &group, &layout, &out);
  out.recv_x_NH = r[0];
  out.recv_topk_idx_NK = r[1];
  out.recv_topk_weights_NK = r[2];
  return out;
}

at::Tensor combine_autograd(Group& group, const at::Tensor& y_NH, const Handle& handle) {
  return CombineFn::apply(y_NH, &group, &handle)[0];
}

}  // namespace moerl::ep
