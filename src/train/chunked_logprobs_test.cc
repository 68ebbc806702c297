// Chunked log-probabilities and entropies equal the full-logits ones (token_logprobs and
// rl::token_entropy over model::sampling_logits), values and gradients in both inputs, for
// every sampling transform and chunk size, including a target the transform dropped.
#include "train/chunked_logprobs.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "rl/aux_losses.h"
#include "train/packed_batch.h"

namespace moerl::train {
namespace {

struct Case {
  const char* name;
  model::SamplingConfig s;
};

std::vector<Case> cases() {
  model::SamplingConfig plain, hot, topk, topp, greedy;
  hot.temperature = 0.7;
  topk.temperature = 1.3;
  topk.top_k = 5;
  topp.top_p = 0.8;
  greedy.greedy = true;
  return {{"t=1", plain}, {"t=0.7", hot}, {"top_k=5", topk}, {"top_p=0.8", topp}, {"greedy", greedy}};
}

double rel(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).norm().item<double>() / std::max(b.norm().item<double>(), 1e-30);
}

TEST(ChunkedLogprobs, EqualTheFullLogitsPathWithGradients) {
  const int64_t B = 3, T = 7, H = 6, V = 11;
  for (const Case& c : cases()) {
    for (int64_t chunk : {int64_t{1}, int64_t{4}, int64_t{1000}}) {
      SCOPED_TRACE(std::string(c.name) + " chunk " + std::to_string(chunk));
      at::manual_seed(3);
      const auto f64 = at::TensorOptions().dtype(at::kDouble);
      at::Tensor h0 = at::randn({B, T, H}, f64), w0 = at::randn({V, H}, f64);
      at::Tensor ids = at::randint(V, {B, T}, at::kLong);
      at::Tensor mask = at::rand({B, T}).gt(0.3).to(at::kFloat);
      at::Tensor r1 = at::randn({B, T}, f64), r2 = at::randn({B, T}, f64);
      // Reference: full logits, then the same layout (position 0 and unmasked positions 0).
      at::Tensor hr = h0.clone().requires_grad_(true), wr = w0.clone().requires_grad_(true);
      at::Tensor logits = model::sampling_logits(at::linear(hr, wr), c.s);
      at::Tensor sel = mask.clone();
      sel.select(1, 0).zero_();
      at::Tensor ref_lp = token_logprobs(logits, ids).to(at::kDouble) * sel;
      at::Tensor ref_ent = rl::token_entropy(shifted_logits(logits)).to(at::kDouble) * sel;
      ((ref_lp * r1).sum() + (ref_ent * r2).sum()).backward();
      // Chunked.
      at::Tensor hc = h0.clone().requires_grad_(true), wc = w0.clone().requires_grad_(true);
      TokenStats got = chunked_token_stats(hc, wc, ids, mask, c.s, chunk, /*with_entropy=*/true);
      ((got.logp_BT * r1).sum() + (got.entropy_BT * r2).sum()).backward();
      // Both score in float32 (token_logprobs, token_entropy): float32 rounding apart.
      EXPECT_LT(rel(got.logp_BT.to(at::kDouble), ref_lp), 1e-6);
      EXPECT_LT(rel(got.entropy_BT.to(at::kDouble), ref_ent), 1e-5);
      EXPECT_LT(rel(hc.grad(), hr.grad()), 1e-5);
      EXPECT_LT(rel(wc.grad(), wr.grad()), 1e-5);
      EXPECT_TRUE(got.logp_BT.select(1, 0).eq(0).all().item<bool>());
    }
  }
}

TEST(ChunkedLogprobs, ADroppedTargetGetsGradientOnlyThroughTheNormaliser) {
  // Top-1: every target but the argmax is dropped; its logprob is then the truncation constant
  // minus the normaliser, whose gradient flows only into the kept entry.
  model::SamplingConfig s;
  s.top_k = 1;
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  at::manual_seed(5);
  at::Tensor h = at::randn({1, 2, 4}, f64).requires_grad_(true), w = at::randn({6, 4}, f64).requires_grad_(true);
  at::Tensor hr = h.detach().clone().requires_grad_(true), wr = w.detach().clone().requires_grad_(true);
  at::Tensor ids = at::tensor({0, 0}, at::kLong).view({1, 2});
  const int64_t argmax = at::linear(h.detach(), w.detach())[0][0].argmax().item<int64_t>();
  ids[0][1] = (argmax + 1) % 6;  // not the argmax: dropped by top-1
  at::Tensor mask = at::ones({1, 2});
  chunked_token_stats(h, w, ids, mask, s, 1, false).logp_BT.sum().backward();
  token_logprobs(model::sampling_logits(at::linear(hr, wr), s), ids).sum().backward();
  EXPECT_LT(rel(h.grad(), hr.grad()), 1e-5);
  EXPECT_LT(rel(w.grad(), wr.grad()), 1e-5);
}

TEST(ChunkedLogprobs, ShapesThatDisagreeAreAnError) {
  at::Tensor h = at::randn({2, 3, 4}), w = at::randn({5, 4}), ids = at::zeros({2, 3}, at::kLong);
  EXPECT_THROW(chunked_token_stats(h, at::randn({5, 3}), ids, at::ones({2, 3}), {}, 8, false), Error);
  EXPECT_THROW(chunked_token_stats(h, w, ids, at::ones({2, 4}), {}, 8, false), Error);
  EXPECT_THROW(chunked_token_stats(h, w, ids, at::ones({2, 3}), {}, 0, false), Error);
}

}  // namespace
}  // namespace moerl::train
