// Activation checkpointing of one decoder layer: the forward runs the layer without
// recording a graph and keeps only its input; the backward re-runs the layer under grad
// mode and backpropagates through it to the input and the layer's parameters.
//
//   LayerFn fn = [=](const at::Tensor& h, const at::Tensor& forced) { return decoder_layer(w, i, h, forced, env); };
//   LayerOutput o = checkpointed_layer(fn, h_BTH, forced_TK, layer_params);
//
// The recompute replays the first pass's expert choice (its topk_idx as the forced routing),
// so tokens reach the same experts even where live routing could tie differently. On MoE
// layers under expert parallelism the recompute issues another dispatch/combine: every rank
// must checkpoint the same layers (they do: the setting is the trainer's, one for all ranks).
// `params` must hold every tensor the layer reads that needs a gradient: those are the
// autograd inputs, and a tensor left out gets no gradient from this layer.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <vector>

#include "model/decoder_layer.h"

namespace moerl::model {

// The layer as a function of its input and forced routing; it must copy (not borrow) what
// it reads, as the backward calls it after the forward returned.
using LayerFn = std::function<LayerOutput(const at::Tensor& h_BTH, const at::Tensor& forced_TK)>;

// fn(h_BTH, forced_TK) with the outputs' gradients computed by recomputation. h_BTH,
// router_logits_TE and topk_weight_TK are differentiable; topk_idx_TK and expert_load_E
// are not.
LayerOutput checkpointed_layer(LayerFn fn, const at::Tensor& h_BTH, const at::Tensor& forced_TK,
                               const std::vector<at::Tensor>& params);

}  // namespace moerl::model
