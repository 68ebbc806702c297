// Chunked next-token log-probabilities and entropies from hidden states: the forward keeps
// only per-position results; the backward recomputes each chunk's logits and applies
//   d logp_t / dz = onehot(t) - p,   d H / dz = -p (log p + H)
// on the entries the sampling transform kept (p = 0 elsewhere; a dropped target's logit is a
// constant), times 1/temperature, to the logits' two inputs.
#include "train/chunked_logprobs.h"

#include <torch/torch.h>

#include "base/error.h"

namespace moerl::train {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

TokenStatsKernels g_kernels;

// The fused kernels apply to CUDA logits of bf16 or float32 under temperature-only scoring.
bool fused_applies(const at::Tensor& h_NH, const model::SamplingConfig& s) {
  model::SamplingConfig rest = s;
  rest.temperature = 1.0;
  return g_kernels.forward != nullptr && h_NH.is_cuda() &&
         (h_NH.scalar_type() == at::kBFloat16 || h_NH.scalar_type() == at::kFloat) && model::is_untempered(rest);
}

double inverse_temperature(const model::SamplingConfig& s) {
  return s.greedy || s.temperature == 1.0 ? 1.0 : 1.0 / s.temperature;
}

// The log-probabilities of rows h_NH: logits as Model::forward computes them (in the model's
// dtype), then in float32 as token_logprobs scores them, then the sampling transform. The
// temperature divides in place, so at most two [chunk, V] float32 tensors live at once.
at::Tensor chunk_logprobs(const at::Tensor& h_NH, const at::Tensor& w_VH, const model::SamplingConfig& s) {
  at::Tensor x = at::linear(h_NH, w_VH).to(at::kFloat);
  if (!model::is_untempered(s)) {
    if (s.temperature != 1.0) x.div_(s.temperature);
    model::SamplingConfig rest = s;
    rest.temperature = 1.0;
    if (!model::is_untempered(rest)) x = model::sampling_logits(x, rest);
  }
  return at::log_softmax(x, -1);
}

struct Saved : torch::CustomClassHolder {
  model::SamplingConfig sampling;
  int64_t chunk = 0;
  bool with_entropy = false;
  bool fused = false;  // the kernels ran; lse is saved
};

class TokenStatsFn : public torch::autograd::Function<TokenStatsFn> {
 public:
  // h_NH: the hidden states of the scored positions' predecessors; targets_N: their tokens.
  static variable_list forward(AutogradContext* ctx, const at::Tensor& h_NH, const at::Tensor& w_VH,
                               const at::Tensor& targets_N, const model::SamplingConfig& sampling, int64_t chunk,
                               bool with_entropy) {
    const int64_t N = h_NH.size(0);
    const auto f = at::TensorOptions().dtype(at::kFloat).device(h_NH.device());
    at::Tensor logp = at::empty({N}, f), ent = at::empty({with_entropy ? N : 0}, f);
    const bool fused = fused_applies(h_NH, sampling);
    at::Tensor lse = at::empty({fused ? N : 0}, f);
    {
      at::NoGradGuard no_grad;
      for (int64_t s = 0; s < N; s += chunk) {
        const int64_t e = std::min(N, s + chunk);
        if (fused) {
          g_kernels.forward(at::linear(h_NH.slice(0, s, e), w_VH), targets_N.slice(0, s, e),
                            inverse_temperature(sampling), logp.slice(0, s, e),
                            with_entropy ? ent.slice(0, s, e) : at::Tensor(), lse.slice(0, s, e));
          continue;
        }
        at::Tensor lp = chunk_logprobs(h_NH.slice(0, s, e), w_VH, sampling);
        logp.slice(0, s, e).copy_(lp.gather(1, targets_N.slice(0, s, e).unsqueeze(1)).squeeze(1));
        if (with_entropy) {
          at::Tensor p = lp.exp();
          ent.slice(0, s, e).copy_(-p.mul_(lp.masked_fill_(lp.isinf(), 0)).sum(-1));
        }
      }
    }
    auto saved = c10::make_intrusive<Saved>();
    saved->sampling = sampling;
    saved->chunk = chunk;
    saved->with_entropy = with_entropy;
    saved->fused = fused;
    ctx->saved_data["cfg"] = c10::IValue::make_capsule(saved);
    ctx->save_for_backward({h_NH, w_VH, targets_N, ent, lse});
    return {logp, ent};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto cfg = c10::static_intrusive_pointer_cast<Saved>(ctx->saved_data["cfg"].toCapsule());
    const variable_list v = ctx->get_saved_variables();
    const at::Tensor &h = v[0], &w = v[1], &targets = v[2], &ent = v[3], &lse = v[4];
    const bool need_h = h.requires_grad(), need_w = w.requires_grad();
    const at::Tensor g_logp = grads[0].defined() ? grads[0].contiguous() : at::zeros({h.size(0)}, ent.options());
    const bool g_ent = cfg->with_entropy && grads[1].defined();
    const at::Tensor g_ent_N = g_ent ? grads[1].contiguous() : at::Tensor();
    const double inv_t = inverse_temperature(cfg->sampling);
    // Gradients in the parameters' dtype, as autograd through linear(h, w).to(kFloat) gives
    // them: dz is rounded to that dtype, then one product per input. grad_w accumulates the
    // chunks in place (beta = 1), so no float32 copy of the [V,H] head is ever made.
    at::Tensor grad_h = need_h ? at::empty_like(h) : at::Tensor();
    at::Tensor grad_w = need_w ? at::zeros_like(w) : at::Tensor();
    at::NoGradGuard no_grad;
    // The chunk's logit gradient (in w's dtype) to the logits' two inputs.
    auto apply_chunk = [&](const at::Tensor& dz_w, int64_t s, int64_t e) {
      if (need_h) {
        at::Tensor grad_h_chunk = grad_h.slice(0, s, e);
        at::mm_out(grad_h_chunk, dz_w, w);
      }
      if (need_w) grad_w.addmm_(dz_w.t(), h.slice(0, s, e));
    };
    const int64_t N = h.size(0);
    for (int64_t s = 0; s < N; s += cfg->chunk) {
      const int64_t e = std::min(N, s + cfg->chunk);
      if (cfg->fused) {
        const at::Tensor dz_w = at::linear(h.slice(0, s, e), w);
        g_kernels.backward(dz_w, targets.slice(0, s, e), lse.slice(0, s, e), g_logp.slice(0, s, e),
                           g_ent ? g_ent_N.slice(0, s, e) : at::Tensor(), g_ent ? ent.slice(0, s, e) : at::Tensor(),
                           inv_t);
        apply_chunk(dz_w, s, e);
        continue;
      }
      at::Tensor lp = chunk_logprobs(h.slice(0, s, e), w, cfg->sampling);
      const at::Tensor t = targets.slice(0, s, e).unsqueeze(1), g = g_logp.slice(0, s, e).unsqueeze(1);
      // A target the transform dropped has a constant logit (kTruncatedLogit): no gradient
      // through it, only through the normaliser.
      const at::Tensor kept = lp.gather(1, t).gt(model::kTruncatedLogit / 2);
      // dz = -p * (g + g_ent * (log p + H)), with p = 0 where the transform dropped a token.
      at::Tensor coef = g;
      if (g_ent) {
        coef = lp.masked_fill(lp.isinf(), 0);
        coef.add_(ent.slice(0, s, e).unsqueeze(1)).mul_(g_ent_N.slice(0, s, e).unsqueeze(1)).add_(g);
      }
      at::Tensor dz = lp.exp_().mul_(coef).neg_();
      coef = at::Tensor();
      dz.scatter_add_(1, t, g * kept.to(g.scalar_type()));
      if (inv_t != 1.0) dz.mul_(inv_t);
      const at::Tensor dz_w = dz.to(w.scalar_type());
      dz = at::Tensor();
      apply_chunk(dz_w, s, e);
    }
    return {grad_h, grad_w, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

void set_token_stats_kernels(TokenStatsKernels kernels) { g_kernels = kernels; }

TokenStats chunked_token_stats(const at::Tensor& hidden_BTH, const at::Tensor& lm_head_VH, const at::Tensor& ids_BT,
                               const at::Tensor& mask_BT, const model::SamplingConfig& sampling, int64_t chunk,
                               bool with_entropy) {
  if (hidden_BTH.dim() != 3 || ids_BT.dim() != 2 || mask_BT.sizes() != ids_BT.sizes() ||
      hidden_BTH.size(0) != ids_BT.size(0) || hidden_BTH.size(1) != ids_BT.size(1) || lm_head_VH.dim() != 2 ||
      lm_head_VH.size(1) != hidden_BTH.size(2) || chunk < 1) {
    throw Error("chunked_token_stats: hidden " + c10::str(hidden_BTH.sizes()) + ", lm_head " +
                    c10::str(lm_head_VH.sizes()) + ", ids " + c10::str(ids_BT.sizes()) + ", mask " +
                    c10::str(mask_BT.sizes()) + ", chunk " + std::to_string(chunk) + " do not fit",
                "hidden is [B,T,H], ids and mask [B,T], lm_head [V,H], chunk >= 1", ErrorCode::kInternal);
  }
  const int64_t B = ids_BT.size(0), T = ids_BT.size(1), H = hidden_BTH.size(2);
  // Position t is scored from the hidden state at t - 1.
  at::Tensor sel_BT = mask_BT.gt(0).to(hidden_BTH.device());
  sel_BT.select(1, 0).fill_(false);
  at::Tensor flat = sel_BT.reshape({-1}).nonzero().squeeze(1);  // [N] positions b*T + t
  at::Tensor h_NH = hidden_BTH.reshape({B * T, H}).index_select(0, flat - 1);
  at::Tensor targets_N = ids_BT.to(hidden_BTH.device()).reshape({-1}).index_select(0, flat);
  variable_list r = TokenStatsFn::apply(h_NH, lm_head_VH, targets_N, sampling, chunk, with_entropy);
  const auto f = r[0].options();
  TokenStats out;
  out.logp_BT = at::zeros({B * T}, f).index_put({flat}, r[0]).view({B, T});
  if (with_entropy) out.entropy_BT = at::zeros({B * T}, f).index_put({flat}, r[1]).view({B, T});
  return out;
}

}  // namespace moerl::train
