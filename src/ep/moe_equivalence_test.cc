// EP MoE block vs the single-rank block, a conformance contract (conformance.h): a small
// MoE (router top-k + per-expert SwiGLU, test_moe.h) run expert-sharded through
// dispatch_autograd/combine_autograd on every CPU backend must match the one-rank
// computation on all tokens, forward and backward, within 1e-5.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ep/autograd.h"
#include "ep/conformance.h"
#include "ep/ep.h"
#include "ep/test_moe.h"

namespace moerl::ep {
namespace {

using testing::EpConformance;

constexpr int64_t kH = 16, kF = 24, kE = 8, kK = 2;

int64_t tokens_of(int r) { return 12 + 5 * r; }
at::Tensor tokens(int r) {
  at::manual_seed(10 + r);
  return at::randn({tokens_of(r), kH});
}
at::Tensor loss_weights(int r) {
  at::manual_seed(50 + r);
  return at::randn({tokens_of(r), kH});
}

double max_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

void check_equivalence(Backend backend, Mode mode) {
  SCOPED_TRACE(std::string(backend_name(backend)) + " " + mode_name(mode));
  Config cfg;
  cfg.backend = backend;
  cfg.mode = mode;
  cfg.max_tokens_per_rank = 64;
  cfg.hidden = kH;
  cfg.max_topk = kK;
  cfg.timeout_s = 60;
  auto g = make_group(cfg, kE);
  const int me = g->rank(), R = g->world_size();
  const int64_t El = kE / R, first = me * El;
  const auto moe = testing::TinyMoe::make(kH, kF, kE, kK, 5);

  // Reference: every rank's tokens through all experts on one rank.
  std::vector<at::Tensor> xs;
  for (int r = 0; r < R; ++r) xs.push_back(tokens(r));
  testing::TinyMoe ref = moe;
  ref.router_HE = moe.router_HE.clone().requires_grad_(true);
  ref.w_gate_EHF = moe.w_gate_EHF.clone().requires_grad_(true);
  ref.w_up_EHF = moe.w_up_EHF.clone().requires_grad_(true);
  ref.w_down_EFH = moe.w_down_EFH.clone().requires_grad_(true);
  at::Tensor X = at::cat(xs).requires_grad_(true);
  auto [ridx, rw] = ref.route(X);
  at::Tensor Y = ref.apply(X, ridx, rw, 0, kE, false);
  std::vector<at::Tensor> cs;
  for (int r = 0; r < R; ++r) cs.push_back(loss_weights(r));
  int64_t row0 = 0;
  for (int r = 0; r < me; ++r) row0 += tokens_of(r);
  at::Tensor loss_all = (Y * at::cat(cs)).sum();
  at::Tensor loss_mine = (Y.narrow(0, row0, tokens_of(me)) * cs[me]).sum();
  auto g_all = torch::autograd::grad({loss_all}, {X, ref.w_gate_EHF, ref.w_up_EHF, ref.w_down_EFH}, {}, true);
  auto g_mine = torch::autograd::grad({loss_mine}, {ref.router_HE});

  // EP: own tokens, replicated router, local experts only.
  testing::TinyMoe local = moe;
  local.router_HE = moe.router_HE.clone().requires_grad_(true);
  local.w_gate_EHF = moe.w_gate_EHF.narrow(0, first, El).clone().requires_grad_(true);
  local.w_up_EHF = moe.w_up_EHF.narrow(0, first, El).clone().requires_grad_(true);
  local.w_down_EFH = moe.w_down_EFH.narrow(0, first, El).clone().requires_grad_(true);
  at::Tensor x = tokens(me).requires_grad_(true);
  auto [idx, w] = local.route(x);
  Dispatched d = dispatch_autograd(*g, x, idx, w, g->get_dispatch_layout(idx, kE));
  at::Tensor rows = local.apply(d.recv_x_NH, d.recv_topk_idx_NK, d.recv_topk_weights_NK, 0, El, true);
  at::Tensor y = combine_autograd(*g, rows, d.handle);
  at::Tensor loss = (y * cs[me]).sum();
  auto g_ep = torch::autograd::grad({loss}, {x, local.router_HE, local.w_gate_EHF, local.w_up_EHF, local.w_down_EFH});

  EXPECT_LE(max_diff(y, Y.narrow(0, row0, tokens_of(me))), 1e-5) << "forward";
  EXPECT_LE(max_diff(g_ep[0], g_all[0].narrow(0, row0, tokens_of(me))), 1e-5) << "grad x";
  EXPECT_LE(max_diff(g_ep[1], g_mine[0]), 1e-5) << "grad router";
  EXPECT_LE(max_diff(g_ep[2], g_all[1].narrow(0, first, El)), 1e-5) << "grad w_gate";
  EXPECT_LE(max_diff(g_ep[3], g_all[2].narrow(0, first, El)), 1e-5) << "grad w_up";
  EXPECT_LE(max_diff(g_ep[4], g_all[3].narrow(0, first, El)), 1e-5) << "grad w_down";
  EXPECT_GT(g_ep[4].abs().sum().item<double>(), 0) << "local experts got no gradient";
  EXPECT_GT(g_ep[1].abs().sum().item<double>(), 0) << "router got no gradient";
}

EP_CONTRACT(MoeBlockMatchesOneRank) {
  for (Mode mode : testing::modes(backend)) check_equivalence(backend, mode);
}

}  // namespace
}  // namespace moerl::ep
