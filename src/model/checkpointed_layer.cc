// A custom autograd function around one decoder layer: no graph in the forward, the
// layer's graph rebuilt and differentiated (torch::autograd::grad wrt the input and the
// parameters) in the backward. libtorch C++ has no torch.utils.checkpoint.
#include "model/checkpointed_layer.h"

#include <torch/torch.h>

#include "base/check.h"

namespace moerl::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The forced routing travels as a non-tensor argument: an int64 constant, not an autograd input.
struct ForcedRouting {
  at::Tensor topk_idx_TK;
};

struct Saved : torch::CustomClassHolder {
  LayerFn fn;
  at::Tensor topk_idx_TK;  // the first pass's choice, forced on the recompute (MoE layers)
  bool is_moe = false;
};

class CheckpointedLayerFn : public torch::autograd::Function<CheckpointedLayerFn> {
 public:
  // Outputs: {h} on dense layers, {h, router_logits, topk_weight, topk_idx, expert_load} on MoE ones.
  static variable_list forward(AutogradContext* ctx, const at::Tensor& h_BTH, at::TensorList params,
                               const LayerFn& fn, const ForcedRouting& forced) {
    LayerOutput o = fn(h_BTH, forced.topk_idx_TK);  // grad mode is off inside Function::forward
    auto saved = c10::make_intrusive<Saved>();
    saved->fn = fn;
    saved->is_moe = o.router_logits_TE.defined();
    saved->topk_idx_TK = o.topk_idx_TK;
    ctx->saved_data["layer"] = c10::IValue::make_capsule(saved);
    std::vector<at::Tensor> keep{h_BTH};
    keep.insert(keep.end(), params.begin(), params.end());
    ctx->save_for_backward(keep);  // version-checked: an in-place change before backward is an error
    if (!saved->is_moe) return {o.h_BTH};
    ctx->mark_non_differentiable({o.topk_idx_TK, o.expert_load_E});
    return {o.h_BTH, o.router_logits_TE, o.topk_weight_TK, o.topk_idx_TK, o.expert_load_E};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = c10::static_intrusive_pointer_cast<Saved>(ctx->saved_data["layer"].toCapsule());
    const variable_list v = ctx->get_saved_variables();
    variable_list inputs{v[0].detach().requires_grad_(true)};
    inputs.insert(inputs.end(), v.begin() + 1, v.end());
    LayerOutput o;
    {
      at::AutoGradMode grad_mode(true);
      o = saved->fn(inputs[0], saved->topk_idx_TK);
    }
    // NOTE: grads are materialised (zeros for unused outputs), so every rank runs the same
    // recompute and backward collectives whatever its loss used.
    variable_list outs{o.h_BTH}, gouts{grads[0]};
    if (saved->is_moe) {
      const at::Tensor* diff[] = {&o.router_logits_TE, &o.topk_weight_TK};
      for (int k = 0; k < 2; ++k) {
        if (!diff[k]->requires_grad()) continue;
        outs.push_back(*diff[k]);
        gouts.push_back(grads[1 + k]);
      }
    }
    variable_list g = torch::autograd::grad(outs, inputs, gouts, /*retain_graph=*/false, /*create_graph=*/false,
                                            /*allow_unused=*/true);
    g.push_back(at::Tensor());  // fn
    g.push_back(at::Tensor());  // forced
    return g;
  }
};

}  // namespace

LayerOutput checkpointed_layer(LayerFn fn, const at::Tensor& h_BTH, const at::Tensor& forced_TK,
                               const std::vector<at::Tensor>& params) {
  for (const at::Tensor& p : params) MOERL_CHECK(p.requires_grad()) << "checkpointed layer input without grad";
  variable_list r = CheckpointedLayerFn::apply(h_BTH, at::TensorList(params), fn, ForcedRouting{forced_TK});
  LayerOutput o;
  o.h_BTH = r[0];
  if (r.size() == 5) {
    o.router_logits_TE = r[1];
    o.topk_weight_TK = r[2];
    o.topk_idx_TK = r[3];
    o.expert_load_E = r[4];
  }
  return o;
}

}  // namespace moerl::model
