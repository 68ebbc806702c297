// Token sampler: greedy, or temperature + top-k + top-p sampling from a seeded generator,
// so a run is reproducible from its seed. Besides the token it returns two logprobs:
//   logprob         log_softmax(logits)[token] at temperature 1, no truncation: the
//                   policy's own logprob, what an RL trainer recomputes (use it as the
//                   behaviour logprob when the trainer scores at temperature 1).
//   sample_logprob  log q(token) under the distribution actually sampled from (logits /
//                   temperature, top-k and top-p truncation, renormalised); 0 for greedy.
// The two are equal when temperature = 1, top_k = 0 and top_p = 1.
//
//   Sampler s(SamplingConfig{.temperature = 0.8, .top_p = 0.95}, /*seed=*/42);
//   Sample x = s.sample(logits_BV);   // x.tokens_B, x.logprob_B, x.sample_logprob_B
//
// Not thread-safe (owns its generator). Invalid settings are a moerl::Error.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace moerl::model {

struct SamplingConfig {
  bool greedy = false;       // argmax; the other fields are ignored
  double temperature = 1.0;  // > 0
  int64_t top_k = 0;         // 0 = all tokens
  double top_p = 1.0;        // (0, 1]; smallest set whose probability reaches top_p
  void validate() const;
};

struct Sample {
  at::Tensor tokens_B;          // int64
  at::Tensor logprob_B;         // float32, model logprob at temperature 1
  at::Tensor sample_logprob_B;  // float32, logprob under the sampling distribution
};

class Sampler {
 public:
  Sampler(SamplingConfig config, uint64_t seed);
  // logits [B,V] (any float dtype); the result lives on the logits' device.
  Sample sample(const at::Tensor& logits_BV);
  const SamplingConfig& config() const { return config_; }

 private:
  SamplingConfig config_;
  at::Generator gen_;
};

}  // namespace moerl::model
