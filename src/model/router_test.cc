// Router semantics against per-token references written with plain loops: softmax top-k,
// DeepSeek-V3's biased sigmoid group routing, and a forced (replayed) selection whose gate
// weights come from the live logits, with gradients into the router weights.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <numeric>

#include "base/error.h"
#include "model/common/moe.h"
#include "model/common/router.h"
#include "model/test_util.h"

namespace moerl::model {
namespace {

using testing::max_abs_diff;

RouterConfig deepseek_router(int64_t E, int64_t K, int64_t G, int64_t topk_groups, bool norm) {
  RouterConfig r{E, K, norm};
  r.scoring = RouterScoring::kSigmoid;
  r.num_groups = G;
  r.topk_groups = topk_groups;
  r.routed_scaling_factor = 2.5;
  r.logits_precision = RouterPrecision::kFloat32;
  return r;
}

// DeepSeek-V3's selection for one token, spelled out: groups ranked by the sum of their two
// best biased scores, the best `topk_groups` groups kept, then the top K biased scores.
std::vector<int64_t> reference_selection(const std::vector<double>& biased, int64_t G, int64_t topk_groups,
                                         int64_t K) {
  const int64_t E = static_cast<int64_t>(biased.size()), per = E / G;
  std::vector<std::pair<double, int64_t>> groups;
  for (int64_t g = 0; g < G; ++g) {
    std::vector<double> v(biased.begin() + g * per, biased.begin() + (g + 1) * per);
    std::sort(v.rbegin(), v.rend());
    groups.push_back({v[0] + v[1], g});
  }
  std::sort(groups.rbegin(), groups.rend());
  std::vector<std::pair<double, int64_t>> cand;
  for (int64_t i = 0; i < topk_groups; ++i) {
    for (int64_t e = groups[i].second * per; e < (groups[i].second + 1) * per; ++e) cand.push_back({biased[e], e});
  }
  std::sort(cand.rbegin(), cand.rend());
  std::vector<int64_t> ids;
  for (int64_t k = 0; k < K; ++k) ids.push_back(cand[k].second);
  return ids;
}

std::vector<int64_t> row(const at::Tensor& t) {
  at::Tensor c = t.to(at::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

TEST(Router, SigmoidGroupRoutingMatchesReference) {
  at::manual_seed(4);
  const int64_t T = 40, E = 16, K = 4, G = 4, TG = 2;
  for (bool norm : {true, false}) {
    const RouterConfig cfg = deepseek_router(E, K, G, TG, norm);
    at::Tensor logits = at::randn({T, E}) * 2, bias = at::randn({E}) * 0.3;
    at::Tensor idx, w;
    route(logits, cfg, &idx, &w, bias);
    ASSERT_EQ(idx.sizes(), at::IntArrayRef({T, K}));
    int differs_from_unbiased = 0;
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> s(E), biased(E);
      for (int64_t e = 0; e < E; ++e) {
        s[e] = 1.0 / (1.0 + std::exp(-logits[t][e].item<double>()));
        biased[e] = s[e] + bias[e].item<double>();
      }
      std::vector<int64_t> want = reference_selection(biased, G, TG, K);
      EXPECT_EQ(row(idx[t]), want) << "token " << t;
      if (reference_selection(s, G, TG, K) != want) ++differs_from_unbiased;
      // Weights: unbiased sigmoid scores of the chosen experts, normalised iff norm, x 2.5.
      double sum = 0;
      for (int64_t e : want) sum += s[e];
      for (int64_t k = 0; k < K; ++k) {
        const double expect = (norm ? s[want[k]] / (sum + 1e-20) : s[want[k]]) * 2.5;
        EXPECT_NEAR(w[t][k].item<double>(), expect, 1e-6) << "token " << t << " k " << k;
      }
    }
    EXPECT_GT(differs_from_unbiased, 0) << "the bias must change some selections";
  }
}

TEST(Router, SoftmaxTopKMatchesReference) {
  at::manual_seed(5);
  const int64_t T = 12, E = 8, K = 2;
  at::Tensor logits = at::randn({T, E});
  at::Tensor idx, w;
  route(logits, {E, K, true}, &idx, &w);
  at::Tensor p = at::softmax(logits, -1);
  auto [vals, ref_idx] = p.topk(K);
  EXPECT_TRUE(at::equal(idx, ref_idx));
  EXPECT_LE(max_abs_diff(w, vals / vals.sum(-1, true)), 1e-7);
}

// Routing replay: a recorded selection is used as is, the weights follow step (b) from the
// live logits (full softmax gathered / unbiased sigmoid gathered), and the router weights
// get gradient through the gathered logits, also for ids the live router would not pick.
TEST(Router, ForcedSelectionKeepsIdsAndWeighsThemLive) {
  at::manual_seed(6);
  const int64_t T = 10, H = 6, E = 8, K = 2;
  at::Tensor x = at::randn({T, H});
  for (RouterScoring scoring : {RouterScoring::kSoftmax, RouterScoring::kSigmoid}) {
    for (bool norm : {true, false}) {
      RouterConfig cfg = scoring == RouterScoring::kSoftmax ? RouterConfig{E, K, norm}
                                                            : deepseek_router(E, K, 4, 2, norm);
      at::Tensor W = at::randn({E, H}).requires_grad_(true);
      at::Tensor logits = at::linear(x, W);
      // Forced ids: the live router's worst K experts per token (a fully drifted selection).
      at::Tensor forced = std::get<1>(at::linear(x, W.detach()).topk(K, -1, /*largest=*/false));
      at::Tensor idx, w;
      route(logits, cfg, &idx, &w, at::randn({E}), forced);
      EXPECT_TRUE(at::equal(idx, forced));

      // The formula, written independently with autograd on a copy of the router.
      at::Tensor W2 = W.detach().clone().requires_grad_(true);
      at::Tensor l2 = at::linear(x, W2);
      at::Tensor full = scoring == RouterScoring::kSoftmax ? at::softmax(l2, -1) : at::sigmoid(l2);
      at::Tensor want = full.gather(1, forced);
      if (norm) want = want / (want.sum(-1, true) + (scoring == RouterScoring::kSigmoid ? 1e-20 : 0.0));
      want = want * cfg.routed_scaling_factor;
      EXPECT_LE(max_abs_diff(w, want), 1e-6);
      EXPECT_GT(w.abs().min().item<double>(), 0.0) << "drifted ids must not read zeros";

      at::Tensor c = at::randn({T, K});
      (w * c).sum().backward();
      (want * c).sum().backward();
      ASSERT_TRUE(W.grad().defined());
      EXPECT_GT(W.grad().abs().sum().item<double>(), 0.0);
      EXPECT_LE(max_abs_diff(W.grad(), W2.grad()), 1e-6);
      if (scoring == RouterScoring::kSigmoid) {
        // Sigmoid scores are per expert: only forced experts' router rows move.
        at::Tensor used = at::zeros({E}, at::kBool).index_fill_(0, forced.reshape({-1}), true);
        for (int64_t e = 0; e < E; ++e) {
          EXPECT_EQ(W.grad()[e].abs().sum().item<double>() > 0, used[e].item<bool>()) << "expert " << e;
        }
      }
    }
  }
}

TEST(Router, ForcedSelectionRunsTheMoeBlockOnThoseExperts) {
  at::manual_seed(7);
  const int64_t T = 7, H = 10, E = 4, K = 2, I = 6;
  MoeWeights w{at::randn({E, H}), {}};
  for (int64_t e = 0; e < E; ++e) w.experts.push_back({at::randn({I, H}), at::randn({I, H}), at::randn({H, I})});
  at::Tensor x = at::randn({T, H});
  at::Tensor forced = at::randint(0, E, {T, 1}, at::kLong);
  forced = at::cat({forced, (forced + 1) % E}, 1);  // two distinct experts per token
  auto group = ep::loopback_group(E);
  MoeOutput o = moe_forward(w, x, {E, K, true}, *group, forced);
  EXPECT_TRUE(at::equal(o.topk_idx_TK, forced));
  at::Tensor p = at::softmax(at::linear(x, w.router_EH), -1);
  for (int64_t t = 0; t < T; ++t) {
    at::Tensor g = p[t].index_select(0, forced[t]);
    g = g / g.sum();
    at::Tensor want = at::zeros({H});
    for (int64_t k = 0; k < K; ++k) {
      const ExpertWeights& ew = w.experts[forced[t][k].item<int64_t>()];
      want += g[k] * swiglu(x[t], ew.gate_IH, ew.up_IH, ew.down_HI);
    }
    EXPECT_LE(max_abs_diff(o.y_TH[t], want), 1e-4) << "token " << t;
  }
  EXPECT_TRUE(at::equal(o.expert_load_E.to(at::kLong), at::bincount(forced.reshape({-1}), {}, E)));
}

TEST(Router, ForcedSelectionOfTheWrongShapeOrRangeIsAnError) {
  at::Tensor logits = at::randn({5, 8}), idx, w;
  const RouterConfig cfg{8, 2, true};
  EXPECT_THROW(route(logits, cfg, &idx, &w, {}, at::zeros({5, 3}, at::kLong)), Error);
  EXPECT_THROW(route(logits, cfg, &idx, &w, {}, at::zeros({4, 2}, at::kLong)), Error);
  EXPECT_THROW(route(logits, cfg, &idx, &w, {}, at::zeros({5, 2}, at::kInt)), Error);
  EXPECT_THROW(route(logits, cfg, &idx, &w, {}, at::full({5, 2}, 8, at::kLong)), Error);
  EXPECT_THROW(route(logits, cfg, &idx, &w, {}, at::full({5, 2}, -2, at::kLong)), Error);
}

// Rows holding a -1 have no record (the last token of a response, padding): they route live,
// the others keep their forced ids.
TEST(Router, RowsWithoutARecordRouteLive) {
  at::Tensor logits = at::randn({4, 8}), live, live_w, idx, w;
  const RouterConfig cfg{8, 2, true};
  route(logits, cfg, &live, &live_w);
  at::Tensor forced = at::tensor(std::vector<int64_t>{5, 6, -1, -1, 0, 1, 3, -1}).reshape({4, 2});
  route(logits, cfg, &idx, &w, {}, forced);
  EXPECT_TRUE(at::equal(idx[0], forced[0]));
  EXPECT_TRUE(at::equal(idx[2], forced[2]));
  EXPECT_TRUE(at::equal(idx[1], live[1]));
  EXPECT_TRUE(at::equal(idx[3], live[3]));
  EXPECT_TRUE(at::allclose(w[1], live_w[1]));
}

}  // namespace
}  // namespace moerl::model
