// AdamW over a named parameter map (the model's HF-named leaves), with global-norm
// gradient clipping. Mixed precision as peers do it: moments are float32 always, and a
// parameter stored in a low precision (bf16, fp16) gets a float32 master copy that the
// update is applied to; the parameter is the master rounded after every step, so updates
// smaller than the parameter's rounding step still accumulate. State (moments, masters,
// step) is plain named tensors so checkpoints store it as safetensors and resume bit for bit.
//
//   AdamW opt(params, {.lr = 1e-3, .weight_decay = 0.01});
//   loss.backward(); double norm = opt.clip_grad_norm(1.0); opt.step(lr); opt.zero_grad();
// Not thread-safe. Parameters must outlive the optimizer (tensors share storage). The
// gradient norm is summed on the device and read back once (not once per parameter).
// Parameters that sit back to back in memory (a MoE layer's packed experts: 384 tensors at
// the Qwen3-30B-A3B shape) get their state allocated the same way, and while their gradients
// are packed alike (model/common/expert_grad.h) every pass over them is one kernel on the run
// (train/tensor_runs.h), chunked to bound the float32 temporaries; the arithmetic per element
// is the same as per tensor.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "train/tensor_runs.h"

namespace moerl::train {

struct AdamWConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

// The sum of 0-dim tensors on one device, read back to the host in one copy and added in
// order (so the result does not depend on the device). 0 for none.
double sum_on_host(const std::vector<at::Tensor>& scalars);

class AdamW {
 public:
  AdamW(std::map<std::string, at::Tensor> params, AdamWConfig cfg);

  // Scales all gradients so their global L2 norm is at most max_norm (<= 0: no clip).
  // Returns the norm before clipping. Parameters without a gradient are skipped.
  double clip_grad_norm(double max_norm);
  void step(double lr);
  void zero_grad();
  int64_t num_steps() const { return step_; }

  // Named state for checkpoints: "exp_avg.<param>", "exp_avg_sq.<param>", "master.<param>"
  // (low-precision parameters only) and "step" ([1] int64). A state without masters (written
  // before they existed) loads with masters taken from the parameters.
  std::map<std::string, at::Tensor> state() const;
  void load_state(const std::map<std::string, at::Tensor>& state);

 private:
  // Parameters laid out back to back, with their state laid out the same way.
  struct Run {
    TensorRun params;                        // members index list_
    at::Tensor exp_avg, exp_avg_sq, master;  // 1-D float32 over the run (master: low precision)
  };
  std::vector<at::Tensor> grads() const;  // list_'s gradients (undefined where none)

  std::map<std::string, at::Tensor> params_;
  std::vector<std::string> names_;  // params_'s keys in order
  std::vector<at::Tensor> list_;    // params_'s values in that order
  std::vector<Run> runs_;
  // Per parameter, views of the runs' state (what state() names and load_state fills).
  std::map<std::string, at::Tensor> exp_avg_;
  std::map<std::string, at::Tensor> exp_avg_sq_;
  std::map<std::string, at::Tensor> master_;  // float32 copies of low-precision parameters
  AdamWConfig cfg_;
  int64_t step_ = 0;
};

}  // namespace moerl::train
