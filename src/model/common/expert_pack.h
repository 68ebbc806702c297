// One MoE layer's local experts held once, in the packed layout grouped GEMMs read:
// w13 [E,2I,H] (expert e's gate rows, then its up rows) and w2 [E,H,I]. The per-expert
// tensors (Hugging Face names: what the optimizer, checkpoints and the CPU loop see) are
// views into them, so an in-place update of either is seen by both and nothing is stacked
// again per forward.
//
//   std::vector<ExpertWeights> v = pack_experts(experts);   // new storage, views returned
//   PackedExperts p = packed_view(v);                        // p.w13_E2IH, p.w2_EHI share it
//   packed_view(unpacked).w13_E2IH.defined() == false;       // not one packed layout
//
// Legend: E local experts, I expert width, H hidden.
// Thread-safety: pure functions of tensors.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "model/common/layers.h"

namespace moerl::model {

struct PackedExperts {
  at::Tensor w13_E2IH;  // undefined: the experts are not views of one packed layout
  at::Tensor w2_EHI;
};

// The packed tensors `experts` are views of (without grad), or undefined ones when their
// tensors do not sit in that layout (e.g. loaded or built one by one).
PackedExperts packed_view(const std::vector<ExpertWeights>& experts);

// Copies `experts` (one dtype and device, gate/up [I,H], down [H,I]) into new packed storage
// and returns views of it in the same order, without grad. Empty in, empty out.
std::vector<ExpertWeights> pack_experts(const std::vector<ExpertWeights>& experts);

}  // namespace moerl::model
