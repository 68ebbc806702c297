// One decode step of the CUDA-graph generation path (fast_generate): static buffers in, float
// logits [B,V] out, so the step can be captured once and replayed. Reads tok_B (the token fed
// to each row), the cache's next_pos (its position), slot_B (the cache slot it goes to: every
// row has its own cursor, so a refilled row starts over while the others go on) and active_B
// (false: the row feeds a masked pad that no later step attends to); writes the cache at slot_B.
// Attention runs over the whole cache under its validity mask (static shapes); MoE layers run
// the grouped-GEMM experts; MLA runs in the absorbed order over the latent cache.
//
//   DecodeStep step(model, cache);  step.slot_B.fill_(prompt_slots);
//   at::Tensor logits_BV = step.run();
#pragma once

#include <utility>
#include <vector>

#include "model/archs/arch.h"
#include "model/common/mla_attention.h"
#include "model/model.h"

namespace moerl::model::cuda {

class DecodeStep {
 public:
  DecodeStep(Model& m, KvCache& cache);
  at::Tensor run();
  // After Model::load_weights: refreshes the copies made from the weights (stacked q/k/v, any
  // unpacked expert stacks) in place, so a graph captured over them stays valid.
  void reload_weights();

  at::Tensor tok_B, slot_B, active_B;
  at::Tensor routing_LBK;  // record_routing: this step's expert ids per MoE layer (static, in the graph)

 private:
  // One GQA attention step: q/k/v of the new token, written at slot_B, attended over the cache.
  at::Tensor gqa(const LayerWeights& w, size_t i, const at::Tensor& h, const at::Tensor& cos, const at::Tensor& sin,
                 const at::Tensor& key_ok);
  static at::Tensor lin(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
    return b.defined() ? at::linear(x, w, b) : at::linear(x, w);
  }
  Model& m_;
  KvCache& cache_;
  std::vector<LayerWeights> layers_;
  std::vector<std::pair<at::Tensor, at::Tensor>> stacked_;
  std::vector<at::Tensor> qkv_w_, qkv_b_;
  MlaShape mla_;
  at::Tensor embed_, norm_, head_;
};

}  // namespace moerl::model::cuda
