// Sampler: logits -> (token, logprobs). Truncation sets cut logits to a finite floor before the softmax.
#include "model/sampler.h"

#include <ATen/CPUGeneratorImpl.h>

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

bool is_untempered(const SamplingConfig& c) {
  return c.greedy || (c.temperature == 1.0 && c.top_k == 0 && c.top_p >= 1.0);
}

at::Tensor sampling_logits(const at::Tensor& logits, const SamplingConfig& c) {
  if (is_untempered(c)) return logits;
  at::Tensor x = logits.scalar_type() == at::kDouble ? logits : logits.to(at::kFloat);
  const int64_t V = x.size(-1);
  if (c.temperature != 1.0) x = x / c.temperature;
  if (c.top_k > 0 && c.top_k < V) {
    at::Tensor kth = std::get<0>(at::topk(x, c.top_k, -1)).narrow(-1, c.top_k - 1, 1);
    x = x.masked_fill(x.lt(kth), kTruncatedLogit);
  }
  if (c.top_p < 1.0) {
    auto [sorted, order] = at::sort(x, -1, /*descending=*/true);
    at::Tensor p = at::softmax(sorted, -1);
    // Drop a token when the tokens before it already reach top_p (the first always stays).
    at::Tensor drop_sorted = (p.cumsum(-1) - p).ge(c.top_p);
    at::Tensor drop = at::zeros_like(drop_sorted).scatter(-1, order, drop_sorted);
    x = x.masked_fill(drop, kTruncatedLogit);
  }
  return x;
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
  at::Tensor q_logp = at::log_softmax(sampling_logits(logits, config_), -1);
  // Sample on CPU with our generator: reproducible whatever the device.
  at::Tensor probs = q_logp.exp().cpu();
  s.tokens_B = at::multinomial(probs, 1, /*replacement=*/false, gen_).squeeze(1).to(logits.device());
  at::Tensor idx = s.tokens_B.unsqueeze(1);
  s.logprob_B = logp_BV.gather(1, idx).squeeze(1);
  s.sample_logprob_B = q_logp.gather(1, idx).squeeze(1);
  return s;
}

}  // namespace moerl::model
