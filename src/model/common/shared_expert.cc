// Shared expert forward (as transformers' Qwen2MoeSparseMoeBlock / DeepseekV3MoE).
#include "model/common/shared_expert.h"

namespace moerl::model {

at::Tensor shared_expert(const SharedExpertWeights& w, const at::Tensor& x_TH) {
  at::Tensor y = swiglu(x_TH, w.mlp.gate_IH, w.mlp.up_IH, w.mlp.down_HI);
  if (w.gate_1H.defined()) y = at::sigmoid(at::linear(x_TH, w.gate_1H)) * y;
  return y;
}

}  // namespace moerl::model
