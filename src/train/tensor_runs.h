// Tensors that tile one stretch of memory back to back (a MoE layer's experts held packed:
// model/common/expert_pack.h, and their packed gradients: expert_grad.h), found so that an
// elementwise pass over them is one kernel on a flat view instead of one per tensor. At the
// Qwen3-30B-A3B shape that is 384 tensors per layer.
//
//   for (const TensorRun& r : contiguous_runs(grads)) r.flat.mul_(scale);  // = each grad
//
// Thread-safety: pure functions of tensors.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <vector>

namespace moerl::train {

struct TensorRun {
  at::Tensor flat;              // 1-D, detached, over the members' memory in address order (a
                                // run of one non-contiguous tensor: that tensor, detached)
  std::vector<size_t> members;  // indices into the input, in address order
  std::vector<int64_t> offset;  // each member's first element in `flat`
};

// Partitions the defined tensors of `ts` into maximal runs: same storage, dtype and device,
// contiguous, each starting where the previous one ends. Undefined tensors are left out; a
// tensor alone (or one that overlaps another) is a run of one whose flat is its own view.
// Runs come in the order of their lowest input index (deterministic, whatever the addresses).
std::vector<TensorRun> contiguous_runs(const std::vector<at::Tensor>& ts);

// Views of a 1-D `flat` (e.g. optimizer state allocated for the whole run) laid out as `run`
// lays out its members: member i is flat[offset[i], +numel) shaped like ts[run.members[i]].
std::vector<at::Tensor> views_of(const at::Tensor& flat, const TensorRun& run, const std::vector<at::Tensor>& ts);

// True when `b`, the runs of tensors x_i given one per member of `a` in a's member order (e.g.
// the members' gradients), is one run laying out x_i exactly as `a` lays out its members: an
// elementwise pass may then pair a.flat with b[0].flat.
bool same_tiling(const TensorRun& a, const std::vector<TensorRun>& b);

// sum(x^2) accumulated in float64 without a float64 copy of more than 2^24 elements at once
// (a packed layer's gradient is ~200M elements). A 0-dim float64 tensor on x's device.
at::Tensor sum_of_squares(const at::Tensor& x);

}  // namespace moerl::train
