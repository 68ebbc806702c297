// Micro-batch planning: without a budget, runs of micro_batch_size consecutive rows (views,
// as before); with one, every row exactly once, rows x longest row within the budget, a row
// longer than the budget alone and reported; fillers pad a plan; take/put round-trip.
#include <gtest/gtest.h>

#include <set>

#include "train/micro_batches.h"

namespace moerl::train {
namespace {

TEST(MicroBatches, WithoutABudgetConsecutiveRowsOverAllColumns) {
  const std::vector<int64_t> lengths{5, 9, 2, 7, 7, 3, 1};
  MicroBatchPlan p = plan_micro_batches(lengths, 1, 7, 9, {.max_rows = 4});
  ASSERT_EQ(p.micro_batches.size(), 2u);
  EXPECT_EQ(p.micro_batches[0].rows, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(p.micro_batches[1].rows, (std::vector<int64_t>{5, 6}));
  for (const MicroBatch& mb : p.micro_batches) EXPECT_EQ(mb.num_cols, 9);
  EXPECT_EQ(p.longest_over_budget, 0);
}

TEST(MicroBatches, BudgetPlanTakesEveryRowOnceWithinTheBudget) {
  const std::vector<int64_t> lengths{5, 9, 2, 7, 7, 3, 1, 4, 6, 8};
  for (int64_t budget : {9, 10, 14, 16, 20, 33, 1000}) {
    MicroBatchPlan p = plan_micro_batches(lengths, 0, 10, 9, {.max_rows = 1, .max_tokens = budget});
    std::multiset<int64_t> seen;
    for (const MicroBatch& mb : p.micro_batches) {
      int64_t longest = 0;
      for (int64_t r : mb.rows) longest = std::max(longest, lengths[r]), seen.insert(r);
      EXPECT_EQ(mb.num_cols, longest) << "budget " << budget;
      EXPECT_LE(mb.padded_tokens(), budget) << "budget " << budget;
    }
    EXPECT_EQ(seen.size(), lengths.size());
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), lengths.size()) << "a row taken twice";
    EXPECT_EQ(p.longest_over_budget, 0);
  }
  // Greedy over rows sorted longest first; budget 16 gives lengths {9}, {8,7}, {7,6}, {5,4,3}, {2,1}.
  MicroBatchPlan p = plan_micro_batches(lengths, 0, 10, 9, {.max_rows = 1, .max_tokens = 16});
  ASSERT_EQ(p.micro_batches.size(), 5u);
  EXPECT_EQ(p.micro_batches[1].rows, (std::vector<int64_t>{9, 3}));
  EXPECT_EQ(p.micro_batches[3].rows, (std::vector<int64_t>{0, 7, 5}));
  EXPECT_EQ(p.micro_batches[4].rows, (std::vector<int64_t>{2, 6}));
  // A whole-batch budget: one micro-batch, max_rows ignored.
  EXPECT_EQ(plan_micro_batches(lengths, 0, 10, 9, {.max_rows = 1, .max_tokens = 90}).micro_batches.size(), 1u);
}

TEST(MicroBatches, RowLongerThanTheBudgetGoesAloneAndIsReported) {
  const std::vector<int64_t> lengths{3, 12, 2, 10, 4};
  MicroBatchPlan p = plan_micro_batches(lengths, 0, 5, 12, {.max_tokens = 8});
  EXPECT_EQ(p.longest_over_budget, 12);
  ASSERT_GE(p.micro_batches.size(), 3u);
  EXPECT_EQ(p.micro_batches[0].rows, std::vector<int64_t>{1});
  EXPECT_EQ(p.micro_batches[1].rows, std::vector<int64_t>{3});
  for (size_t i = 2; i < p.micro_batches.size(); ++i) EXPECT_LE(p.micro_batches[i].padded_tokens(), 8);
}

TEST(MicroBatches, FillersPadAPlanAndTakePutRoundTrip) {
  MicroBatchPlan p = plan_micro_batches({3, 1, 2}, 0, 3, 3, {.max_tokens = 6});
  const size_t n = p.micro_batches.size();
  pad_plan(p, static_cast<int64_t>(n) + 2);
  ASSERT_EQ(p.micro_batches.size(), n + 2);
  EXPECT_TRUE(p.micro_batches.back().filler());
  EXPECT_FALSE(p.micro_batches.front().filler());

  at::Tensor x = at::arange(12, at::kFloat).view({3, 4});
  const MicroBatch mb{.rows = {2, 0}, .num_cols = 2};
  EXPECT_TRUE(at::equal(take_rows(x, mb), at::tensor({8.f, 9.f, 0.f, 1.f}).view({2, 2})));
  at::Tensor y = at::zeros({3, 4});
  put_rows(y, mb, take_rows(x, mb) + 1);
  EXPECT_TRUE(at::equal(y[2], at::tensor({9.f, 10.f, 0.f, 0.f})));
  EXPECT_TRUE(at::equal(y[1], at::zeros({4})));
  const MicroBatch run{.rows = {1, 2}, .num_cols = 4};  // consecutive, every column: a view
  EXPECT_EQ(take_rows(x, run).data_ptr(), x[1].data_ptr());
}

}  // namespace
}  // namespace moerl::train
