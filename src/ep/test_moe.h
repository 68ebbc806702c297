// Test helpers for ep/: a tiny MoE computation (router top-k + per-expert SwiGLU) written
// with plain at:: ops, runnable on all experts (reference) or on the dispatched rows of
// one rank's experts. Test-only; not part of the library.
#pragma once

#include <ATen/ATen.h>

#include "ep/ep.h"

namespace moerl::ep::testing {

struct TinyMoe {
  int64_t hidden = 0, ffn = 0, num_experts = 0, topk = 0;
  at::Tensor router_HE;                  // [H,E]
  at::Tensor w_gate_EHF, w_up_EHF, w_down_EFH;  // all experts

  static TinyMoe make(int64_t hidden, int64_t ffn, int64_t num_experts, int64_t topk, uint64_t seed) {
    at::manual_seed(seed);
    TinyMoe m;
    m.hidden = hidden, m.ffn = ffn, m.num_experts = num_experts, m.topk = topk;
    m.router_HE = at::randn({hidden, num_experts}) * 0.5;
    m.w_gate_EHF = at::randn({num_experts, hidden, ffn}) * (1.0 / std::sqrt(double(hidden)));
    m.w_up_EHF = at::randn({num_experts, hidden, ffn}) * (1.0 / std::sqrt(double(hidden)));
    m.w_down_EFH = at::randn({num_experts, ffn, hidden}) * (1.0 / std::sqrt(double(ffn)));
    return m;
  }
  // Router: softmax over experts, top-k, renormalised weights.
  std::pair<at::Tensor, at::Tensor> route(const at::Tensor& x_TH) const {
    auto probs = at::softmax(at::matmul(x_TH, router_HE), -1);
    auto [w, idx] = probs.topk(topk, -1);
    return {idx, w / w.sum(-1, true)};
  }
  // SwiGLU expert e (global id) on rows x.
  at::Tensor expert(int64_t e, const at::Tensor& x) const {
    auto g = at::matmul(x, w_gate_EHF[e]);
    auto u = at::matmul(x, w_up_EHF[e]);
    return at::matmul(at::silu(g) * u, w_down_EFH[e]);
  }
  // y[t] = sum_k w[t,k] * expert_{idx[t,k]}(x[t]) for experts [first, first + count);
  // entries with idx -1 (or outside the range) contribute nothing. idx holds ids relative
  // to `first` when `local` is set (dispatched rows carry local ids).
  at::Tensor apply(const at::Tensor& x_NH, const at::Tensor& idx_NK, const at::Tensor& w_NK,
                   int64_t first, int64_t count, bool local) const {
    at::Tensor y = at::zeros_like(x_NH);
    for (int64_t e = 0; e < count; ++e) {
      const int64_t id = local ? e : first + e;
      at::Tensor hit = idx_NK.eq(id);  // [N,K]
      at::Tensor rows = hit.any(1).nonzero().select(1, 0);
      if (rows.numel() == 0) continue;
      at::Tensor coef = (w_NK * hit.to(w_NK.scalar_type())).sum(1).index_select(0, rows).unsqueeze(1);
      y = y.index_add(0, rows, coef.to(x_NH.scalar_type()) * expert(first + e, x_NH.index_select(0, rows)));
    }
    return y;
  }
};

}  // namespace moerl::ep::testing
