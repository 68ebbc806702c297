// The packed expert tensors for a forward in grad mode, without a copy, and with one
// gradient buffer per layer: w13 [E,2I,H] and w2 [E,H,I] over the experts' packed storage
// (expert_pack.h), differentiable in the per-expert parameters. Their gradients are
// accumulated by one add per tensor into a packed buffer that the parameters' .grad tensors
// are plain (non-view) aliases of, instead of a stack per forward and 3E adds per backward.
//
//   PackedExperts p = packed_for_grad(layer_experts);  // undefined when not packed
//   y = grouped_experts(x, idx, w, p.w13_E2IH, p.w2_EHI); loss.backward();
//   layer_experts[3].up_IH.grad();                      // rows of one [E,2I,H] buffer
//
// The optimizer may zero the grads in place (detach_ + zero_) or drop them; a grad that is
// not an alias of one packed buffer (dropped, or replaced) is copied into a new buffer at the
// next backward. Thread-safety: as autograd (one backward at a time per model).
#pragma once

#include "model/common/expert_pack.h"

namespace moerl::model {

// Undefined tensors when the experts are not views of one packed layout, or only some of
// their tensors require grad; packed_view(experts) when none does or grad mode is off.
PackedExperts packed_for_grad(const std::vector<ExpertWeights>& experts);

}  // namespace moerl::model
