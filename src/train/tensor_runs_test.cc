// contiguous_runs: views of one buffer found back to back whatever order they come in; gaps,
// other storages, dtypes and non-contiguous tensors cut runs; the run order does not depend on
// addresses. sum_of_squares: float64 sums, chunked above 2^24 elements.
#include "train/tensor_runs.h"

#include <gtest/gtest.h>

namespace moerl::train {
namespace {

TEST(TensorRuns, ViewsOfOneBufferAreOneRunInAddressOrderWhateverTheInputOrder) {
  at::Tensor buf = at::arange(24, at::kFloat);
  at::Tensor a = buf.narrow(0, 0, 6).view({2, 3}), b = buf.narrow(0, 6, 8), c = buf.narrow(0, 14, 10).view({5, 2});
  std::vector<TensorRun> runs = contiguous_runs({c, at::Tensor(), a, b});
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].members, (std::vector<size_t>{2, 3, 0}));
  EXPECT_EQ(runs[0].offset, (std::vector<int64_t>{0, 6, 14}));
  EXPECT_EQ(runs[0].flat.numel(), 24);
  EXPECT_EQ(runs[0].flat.data_ptr(), buf.data_ptr());
  runs[0].flat.mul_(2);  // one pass reaches every member
  EXPECT_EQ(c[4][1].item<float>(), 46.f);
  std::vector<at::Tensor> state = views_of(at::zeros({24}), runs[0], {c, at::Tensor(), a, b});
  EXPECT_EQ(state[0].sizes(), a.sizes());
  EXPECT_EQ(state[2].sizes(), c.sizes());
  EXPECT_EQ(static_cast<char*>(state[2].data_ptr()) - static_cast<char*>(state[0].data_ptr()), 14 * 4);
}

TEST(TensorRuns, GapsStoragesDtypesAndStridesCutRuns) {
  at::Tensor buf = at::zeros({20});
  at::Tensor a = buf.narrow(0, 0, 4), gap = buf.narrow(0, 5, 4);       // one element between
  at::Tensor other = at::zeros({4}), half = at::zeros({4}, at::kBFloat16);
  at::Tensor strided = at::zeros({4, 4}).t();                           // not contiguous
  std::vector<TensorRun> runs = contiguous_runs({a, gap, other, half, strided});
  ASSERT_EQ(runs.size(), 5u);
  for (size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i].members, std::vector<size_t>{i}) << i;
  EXPECT_EQ(runs[4].flat.sizes(), strided.sizes()) << "a non-contiguous tensor stays as it is";
  EXPECT_FALSE(same_tiling(runs[0], {runs[1]})) << "b's members must be 0..n-1 laid out as a's";
}

TEST(TensorRuns, SameTilingNeedsTheSameLayoutMemberForMember) {
  at::Tensor p = at::zeros({12}), g = at::zeros({12}), g_swapped = at::zeros({12});
  std::vector<at::Tensor> ps{p.narrow(0, 0, 4), p.narrow(0, 4, 8)};
  TensorRun pr = contiguous_runs(ps)[0];
  EXPECT_TRUE(same_tiling(pr, contiguous_runs({g.narrow(0, 0, 4), g.narrow(0, 4, 8)})));
  // Same sizes in another order: one run, but member 0 is not first.
  EXPECT_FALSE(same_tiling(pr, contiguous_runs({g_swapped.narrow(0, 8, 4), g_swapped.narrow(0, 0, 8)})));
  EXPECT_FALSE(same_tiling(pr, contiguous_runs({g.narrow(0, 0, 4), at::Tensor()})));
}

TEST(TensorRuns, SumOfSquaresIsFloat64AndChunked) {
  const int64_t n = (int64_t{1} << 24) + 5;  // two chunks
  at::Tensor x = at::full({n}, 0.5, at::kBFloat16);
  at::Tensor s = sum_of_squares(x);
  EXPECT_EQ(s.scalar_type(), at::kDouble);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item<double>(), 0.25 * static_cast<double>(n));  // exact: float32 would round
  EXPECT_EQ(sum_of_squares(at::tensor({3.0, -4.0})).item<double>(), 25.0);
}

}  // namespace
}  // namespace moerl::train
