// sample_rows (model/cuda/sample_rows.h) against at:: references: greedy tokens are argmax's
// (the first index on a tie) with log_softmax's logprob; sampled tokens follow
// softmax(x / T) (frequencies over many rows within 5 standard deviations) and carry
// log_softmax(x)[token] and log_softmax(x / T)[token]; one (seed, draw) repeats, another
// draw differs; rows of the real vocabulary (151936) and a vocabulary not a multiple of 4; a
// row of only -inf gives token 0.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>

#include <cmath>

#include "model/cuda/sample_rows.h"
#include "model/cuda/tests/gpu_test_util.h"

namespace moerl::model {
namespace {

using ::moerl::testing::rel_err;

struct Drawn {
  at::Tensor tok, lp, slp;
};

Drawn draw(const at::Tensor& x, bool greedy, float t, uint64_t seed, uint64_t d) {
  const int64_t R = x.size(0);
  Drawn r{at::empty({R}, x.options().dtype(at::kLong)), at::empty({R}, x.options()), at::empty({R}, x.options())};
  EXPECT_EQ(cuda::sample_rows(x.data_ptr<float>(), R, x.size(1), greedy, t, seed, d, r.tok.data_ptr<int64_t>(),
                              r.lp.data_ptr<float>(), r.slp.data_ptr<float>(), c10::cuda::getCurrentCUDAStream().stream()),
            cudaSuccess);
  return r;
}

at::Tensor at_token(const at::Tensor& logp, const at::Tensor& tok) { return logp.gather(1, tok.unsqueeze(1)).squeeze(1); }

TEST(SampleRowsGpu, GreedyIsArgmaxWithItsLogprob) {
  at::manual_seed(5);
  for (int64_t V : {151936, 1001, 3}) {
    at::Tensor x = at::randn({64, V}, at::TensorOptions().device(at::kCUDA)) * 4;
    x[1].fill_(0.5);  // a tie everywhere: the first index
    x[2][V - 1] = 100.f;
    const Drawn d = draw(x, true, 1.f, 7, 0);
    EXPECT_TRUE(at::equal(d.tok, x.argmax(-1))) << "V " << V;
    EXPECT_EQ(d.tok[1].item<int64_t>(), 0);
    EXPECT_EQ(d.tok[2].item<int64_t>(), V - 1);
    EXPECT_LT(rel_err(d.lp, at_token(at::log_softmax(x, -1), d.tok)), 1e-5) << "V " << V;
    x[3].fill_(-INFINITY);  // nothing finite: token 0, logprob -inf
    for (bool greedy : {true, false}) {
      const Drawn e = draw(x, greedy, 1.f, 7, 1);
      EXPECT_EQ(e.tok[3].item<int64_t>(), 0) << "greedy " << greedy;
      EXPECT_EQ(e.lp[3].item<float>(), -INFINITY) << "greedy " << greedy;
    }
    EXPECT_EQ(d.slp.abs().max().item<float>(), 0.f);
  }
}

TEST(SampleRowsGpu, SampledTokensFollowTheTemperedSoftmax) {
  const float T = 0.7f;
  const int64_t R = 40000;
  at::Tensor row = at::tensor({1.0f, 0.2f, -1.0f, 2.0f, 0.0f, -3.0f, 1.5f}, at::kFloat).to(at::kCUDA);
  at::Tensor x = row.unsqueeze(0).expand({R, row.size(0)}).contiguous();
  const Drawn d = draw(x, false, T, 11, 3);
  const at::Tensor p = at::softmax(row / T, 0).cpu();
  const at::Tensor freq = at::bincount(d.tok.cpu(), {}, row.size(0)).to(at::kDouble) / R;
  for (int64_t v = 0; v < row.size(0); ++v) {
    const double pv = p[v].item<double>(), sd = std::sqrt(pv * (1 - pv) / R);
    EXPECT_NEAR(freq[v].item<double>(), pv, 5 * sd + 1e-6) << "token " << v;
  }
  EXPECT_LT(rel_err(d.lp, at_token(at::log_softmax(x, -1), d.tok)), 1e-5);
  EXPECT_LT(rel_err(d.slp, at_token(at::log_softmax(x / T, -1), d.tok)), 1e-5);
}

TEST(SampleRowsGpu, RealVocabularyRowsRepeatPerDrawAndDifferAcrossDraws) {
  at::manual_seed(6);
  at::Tensor x = at::randn({256, 151936}, at::TensorOptions().device(at::kCUDA));
  const Drawn a = draw(x, false, 1.f, 9, 4), b = draw(x, false, 1.f, 9, 4), c = draw(x, false, 1.f, 9, 5);
  EXPECT_TRUE(at::equal(a.tok, b.tok));
  EXPECT_GT(a.tok.ne(c.tok).sum().item<int64_t>(), 250) << "another draw gives other tokens";
  EXPECT_LT(rel_err(a.lp, at_token(at::log_softmax(x, -1), a.tok)), 1e-5);
  EXPECT_TRUE(at::equal(a.lp, a.slp)) << "temperature 1: the sampling logprob is the logprob";
  EXPECT_TRUE(a.tok.ge(0).logical_and(a.tok.lt(151936)).all().item<bool>());
}

TEST(SampleRowsGpu, RefusesBadSizes) {
  at::Tensor x = at::zeros({2, 4}, at::TensorOptions().device(at::kCUDA));
  int64_t* t = nullptr;
  float* f = nullptr;
  auto s = c10::cuda::getCurrentCUDAStream().stream();
  EXPECT_EQ(cuda::sample_rows(x.data_ptr<float>(), 0, 4, true, 1.f, 0, 0, t, f, f, s), cudaErrorInvalidValue);
  EXPECT_EQ(cuda::sample_rows(x.data_ptr<float>(), 2, 0, true, 1.f, 0, 0, t, f, f, s), cudaErrorInvalidValue);
  EXPECT_EQ(cuda::sample_rows(x.data_ptr<float>(), 2, 4, false, 0.f, 0, 0, t, f, f, s), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace moerl::model
