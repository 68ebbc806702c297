// Differentiable dispatch/combine. Dispatch backward is a combine of the gradient of
// recv_x (plus a combine of the gradient of recv_topk_weights, routed back to the top-k
// slots it came from); combine backward is a cached dispatch of the output gradient.
//
//   ep::Layout l = g.get_dispatch_layout(topk_idx, E);
//   ep::Dispatched d = ep::dispatch_autograd(g, x, topk_idx, topk_weights, l);
//   at::Tensor y = ep::combine_autograd(g, experts(d), d.handle);
//   y.sum().backward();   // grads reach x and topk_weights
//
// The Group must outlive the backward pass. Backward calls are collective like the
// forward ones: every rank runs them in the same order (SPMD autograd does this). Undefined
// incoming gradients are treated as zeros so ranks never skip a collective.
#pragma once

#include <ATen/ATen.h>

#include "ep/ep.h"

namespace moerl::ep {

// recv_x_NH and recv_topk_weights_NK carry grad_fn; recv_topk_idx_NK does not.
Dispatched dispatch_autograd(Group& group, const at::Tensor& x_TH, const at::Tensor& topk_idx_TK,
                             const at::Tensor& topk_weights_TK, const Layout& layout);
at::Tensor combine_autograd(Group& group, const at::Tensor& y_NH, const Handle& handle);

}  // namespace moerl::ep
