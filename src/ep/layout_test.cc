// Layout kernel vs a plain recomputation, and its input checks.
#include <gtest/gtest.h>

#include "base/error.h"
#include "ep/ep.h"
#include "ep/torch/tensors.h"

namespace moerl::ep {
namespace {

at::Tensor random_topk(int64_t T, int64_t K, int64_t E, double drop, uint64_t seed) {
  at::manual_seed(seed);
  at::Tensor idx = at::randint(0, E, {T, K}, at::kLong);
  at::Tensor dropped = at::rand({T, K}).lt(drop);
  return idx.masked_fill(dropped, -1);
}

TEST(Layout, MatchesPlainRecomputation) {
  for (auto [T, K, E, R] : std::vector<std::array<int64_t, 4>>{{37, 4, 16, 4}, {100, 8, 256, 8}, {5, 1, 2, 2}, {0, 2, 4, 2}}) {
    at::Tensor idx = random_topk(T, K, E, 0.2, T * 31 + E);
    Layout l = detail::compute_layout(idx, E, static_cast<int>(R));
    auto a = idx.accessor<int64_t, 2>();
    std::vector<int64_t> per_rank(R, 0), per_expert(E, 0);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<bool> hit(R, false);
      for (int64_t k = 0; k < K; ++k) {
        if (a[t][k] < 0) continue;
        per_expert[a[t][k]]++;
        hit[a[t][k] / (E / R)] = true;
      }
      for (int64_t r = 0; r < R; ++r) {
        EXPECT_EQ(l.is_token_in_rank[t][r].item<bool>(), hit[r]) << "t=" << t << " r=" << r;
        per_rank[r] += hit[r];
      }
    }
    for (int64_t r = 0; r < R; ++r) EXPECT_EQ(l.num_tokens_per_rank[r].item<int64_t>(), per_rank[r]);
    for (int64_t e = 0; e < E; ++e) EXPECT_EQ(l.num_tokens_per_expert[e].item<int64_t>(), per_expert[e]);
  }
}

TEST(Layout, TokenWithSeveralExpertsOnOneRankCountsOnce) {
  at::Tensor idx = at::tensor({0, 1, 2, 5}, at::kLong).view({1, 4});  // E=8, R=2: ranks 0,0,0,1
  Layout l = detail::compute_layout(idx, 8, 2);
  EXPECT_EQ(l.num_tokens_per_rank[0].item<int64_t>(), 1);
  EXPECT_EQ(l.num_tokens_per_rank[1].item<int64_t>(), 1);
  EXPECT_EQ(l.num_tokens_per_expert.sum().item<int64_t>(), 4);
}

TEST(Layout, RejectsBadInput) {
  at::Tensor idx = at::tensor({0, 8}, at::kLong).view({1, 2});
  try {
    detail::compute_layout(idx, 8, 2);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("topk_idx[0,1]=8"), std::string::npos) << e.what();
  }
  EXPECT_THROW(detail::compute_layout(idx.to(at::kInt), 8, 2), Error);
  EXPECT_THROW(detail::compute_layout(at::zeros({2, 2}, at::kLong), 6, 4), Error);
  EXPECT_THROW(detail::compute_layout(at::full({1, 1}, -2, at::kLong), 4, 2), Error);
}

}  // namespace
}  // namespace moerl::ep
