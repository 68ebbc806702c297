// Sampler: logits -> (token, logprobs). Truncation masks logits to -inf before the softmax.
#include "model/sampler.h"

#include <ATen/CPUGeneratorImpl.h>

#include <limits>

#include "base/error.h"

namespace moerl::model {

void SamplingConfig::validate() const {
  if (greedy) return;
  if (!(temperature > 0.0)) {
    throw Error("sampling temperature=" + std::to_string(temperature) + " must be > 0",
                "use greedy decoding instead of temperature 0");
  }
  if (top_k < 0) throw Error("top_k=" + std::to_string(top_k) + " must be >= 0", "0 keeps every token");
  if (!(top_p > 0.0 && top_p <= 1.0)) {
    throw Error("top_p=" + std::to_string(top_p) + " must be in (0, 1]", "1 keeps every token");
  }
}

Sampler::Sampler(SamplingConfig config, uint64_t seed)
    : config_(config), gen_(at::detail::createCPUGenerator(seed)) {
  config_.validate();
}

Sample Sampler::sample(const at::Tensor& logits_BV) {
  at::Tensor logits = logits_BV.to(at::kFloat);
  at::Tensor logp_BV = at::log_softmax(logits, -1);
  Sample s;
  if (config_.greedy) {
    s.tokens_B = logits.argmax(-1);
    s.logprob_B = logp_BV.gather(1, s.tokens_B.unsqueeze(1)).squeeze(1);
    s.sample_logprob_B = at::zeros_like(s.logprob_B);
    return s;
  }
  const int64_t V = logits.size(1);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  at::Tensor scaled = config_.temperature == 1.0 ? logits : logits / config_.temperature;
  if (config_.top_k > 0 && config_.top_k < V) {
    at::Tensor kth = std::get<0>(at::topk(scaled, config_.top_k, -1)).narrow(1, config_.top_k - 1, 1);
    scaled = scaled.masked_fill(scaled.lt(kth), neg_inf);
  }
  if (config_.top_p < 1.0) {
    auto [sorted, order] = at::sort(scaled, -1, /*descending=*/true);
    at::Tensor cum = at::softmax(sorted, -1).cumsum(-1);
    // Drop a token when the tokens before it already reach top_p (the first always stays).
    at::Tensor drop_sorted = (cum - at::softmax(sorted, -1)).ge(config_.top_p);
    at::Tensor drop = at::zeros_like(drop_sorted).scatter(1, order, drop_sorted);
    scaled = scaled.masked_fill(drop, neg_inf);
  }
  at::Tensor q_logp = at::log_softmax(scaled, -1);
  // Sample on CPU with our generator: reproducible whatever the device.
  at::Tensor probs = q_logp.exp().cpu();
  s.tokens_B = at::multinomial(probs, 1, /*replacement=*/false, gen_).squeeze(1).to(logits.device());
  at::Tensor idx = s.tokens_B.unsqueeze(1);
  s.logprob_B = logp_BV.gather(1, idx).squeeze(1);
  s.sample_logprob_B = q_logp.gather(1, idx).squeeze(1);
  return s;
}

}  // namespace moerl::model
