// The tensor-op send plans (device_plan for nccl, ipc_plan for cuda_ipc) run on the CPU here and
// must describe exactly the rows of the host plan (kernels::build_routing), which every host
// transport sends: same rows, same order, same metadata; for ipc_plan, the row numbers its
// send kernel writes at, the counts the peers read and the combine positions.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "ep/kernels/routing.h"
#include "ep/torch/device_plan.h"
#include "ep/torch/ipc_plan.h"

namespace moerl::ep::detail {
namespace {

struct Case {
  int64_t T, K, E;
  int R;
};

// Random top-k with dropped slots (-1) and repeated ids within a token.
std::pair<at::Tensor, at::Tensor> random_routing(const Case& c, uint64_t seed) {
  at::manual_seed(seed);
  at::Tensor idx = at::randint(0, c.E, {c.T, c.K}, at::kLong).masked_fill(at::rand({c.T, c.K}).lt(0.15), -1);
  at::Tensor w = at::rand({c.T, c.K}).masked_fill(idx.lt(0), 0.f);
  return {idx, w};
}

kernels::Routing host_plan(const at::Tensor& idx, const at::Tensor& w, const Case& c, Mode mode) {
  return kernels::build_routing(idx.data_ptr<int64_t>(), w.data_ptr<float>(), c.T, c.K, c.E, c.R,
                                mode == Mode::kLowLatency);
}

// The destination group of host row i: its rank, or (low_latency) its global expert.
int64_t group_of_row(const kernels::Routing& r, int64_t i, Mode mode) {
  int d = 0;
  while (r.dest_offsets[d + 1] <= i) ++d;
  if (mode == Mode::kNormal) return d;
  for (int64_t k = 0; k < r.topk; ++k)
    if (r.row_topk_idx[i * r.topk + k] >= 0) return d * r.experts_per_rank + r.row_topk_idx[i * r.topk + k];
  return -1;
}

const std::vector<Case> kCases = {{37, 4, 16, 4}, {64, 8, 16, 2}, {5, 1, 2, 2}, {0, 2, 4, 2}, {23, 6, 8, 8}};

TEST(DevicePlan, RowsAndMetadataEqualTheHostPlan) {
  for (Mode mode : {Mode::kNormal, Mode::kLowLatency})
    for (const Case& c : kCases) {
      auto [idx, w] = random_routing(c, 7 * c.T + c.E);
      kernels::Routing r = host_plan(idx, w, c, mode);
      DevicePlan p = device_plan(idx, w, c.E, c.R, mode);
      const std::string where = std::string(mode_name(mode)) + " T=" + std::to_string(c.T) + " R=" + std::to_string(c.R);
      ASSERT_EQ(p.row_token.size(0), r.num_rows()) << where;
      EXPECT_EQ(host_values(p.row_token), r.row_token) << where;
      for (int64_t i = 0; i < r.num_rows(); ++i) EXPECT_EQ(p.row_group[i].item<int64_t>(), group_of_row(r, i, mode)) << where;
      EXPECT_EQ(host_values(p.row_idx.view(-1)),
                std::vector<int64_t>(r.row_topk_idx.begin(), r.row_topk_idx.end())) << where;
      EXPECT_TRUE(at::equal(p.row_w.view(-1), at::tensor(r.row_topk_weights))) << where;
      EXPECT_EQ(p.num_bad.item<int64_t>(), 0);
    }
}

TEST(IpcPlan, RowNumbersCountsAndCombinePositionsFollowTheHostPlan) {
  const int64_t max_rows = 1000;
  for (Mode mode : {Mode::kNormal, Mode::kLowLatency})
    for (const Case& c : kCases) {
      auto [idx, w] = random_routing(c, 11 * c.T + c.E);
      kernels::Routing r = host_plan(idx, w, c, mode);
      std::shared_ptr<IpcState> st = ipc_plan(idx, w, c.E, c.R, mode, max_rows);
      const std::string where = std::string(mode_name(mode)) + " T=" + std::to_string(c.T) + " R=" + std::to_string(c.R);
      const int64_t El = c.E / c.R, K = c.K;
      std::vector<int64_t> rows = host_values(st->rows_R), first = host_values(st->first_R);
      std::vector<int64_t> row_GT = host_values(st->row_GT);
      at::Tensor header = st->header_RC;
      std::vector<std::vector<int64_t>> codes(c.T);  // per token, in host order (rank, then expert)
      for (int d = 0; d < c.R; ++d) {
        ASSERT_EQ(rows[d], r.rows_to(d)) << where << " d=" << d;
        EXPECT_EQ(first[d], r.dest_offsets[d]) << where;
        EXPECT_EQ(header[d][0].item<int64_t>(), r.rows_to(d)) << where;
        std::vector<int64_t> per_expert(El, 0);
        for (int64_t j = 0; j < r.rows_to(d); ++j) {
          const int64_t i = r.dest_offsets[d] + j, t = r.row_token[i], g = group_of_row(r, i, mode);
          // The send kernel writes host row i at row_GT[g, t] - first[d] of d's region.
          EXPECT_EQ(row_GT[g * c.T + t] - first[d], j) << where << " row " << i;
          codes[t].push_back(d * max_rows + j);
          std::vector<bool> seen(El, false);
          for (int64_t k = 0; k < K; ++k) {
            const int32_t e = r.row_topk_idx[i * K + k];
            if (e >= 0 && !seen[e]) ++per_expert[e], seen[e] = true;
          }
        }
        for (int64_t e = 0; e < El; ++e) EXPECT_EQ(header[d][1 + e].item<int64_t>(), per_expert[e]) << where << " e=" << e;
      }
      const int64_t P = st->combine_code_TP.size(1);
      EXPECT_EQ(P, std::max<int64_t>(1, std::min<int64_t>(K, mode == Mode::kNormal ? c.R : c.E)));
      for (int64_t t = 0; t < c.T; ++t) {
        std::vector<int64_t> got = host_values(st->combine_code_TP[t]);
        std::vector<int64_t> want = codes[t];
        want.resize(P, -1);
        EXPECT_EQ(got, want) << where << " token " << t;
      }
      EXPECT_EQ(st->num_bad.item<int64_t>(), 0);
    }
}

TEST(IpcPlan, IdsOutsideTheExpertsAreCountedAndSendNothing) {
  at::Tensor idx = at::tensor(std::vector<int64_t>{0, 5, -3, 2, 9, -1}).view({3, 2});
  at::Tensor w = at::ones({3, 2});
  std::shared_ptr<IpcState> st = ipc_plan(idx, w, 4, 2, Mode::kNormal, 10);
  EXPECT_EQ(st->num_bad.item<int64_t>(), 3);  // 5, -3 and 9
  EXPECT_EQ(host_values(st->rows_R), (std::vector<int64_t>{1, 1}));  // token 0 -> rank 0, token 1 -> rank 1
  EXPECT_EQ(host_values(st->key_TK.view(-1)), (std::vector<int64_t>{0, -1, -1, 1, -1, -1}));
}

}  // namespace
}  // namespace moerl::ep::detail
