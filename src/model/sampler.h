// Token sampler: greedy, or temperature + top-k + top-p sampling from a seeded generator,
// so a run is reproducible from its seed. Besides the token it returns two logprobs:
//   logprob         log_softmax(logits)[token] at temperature 1, no truncation: the
//                   policy's own logprob, what an RL trainer recomputes (use it as the
//                   behaviour logprob when the trainer scores at temperature 1).
//   sample_logprob  log q(token) under the distribution actually sampled from (logits /
//                   temperature, top-k and top-p truncation, renormalised; sampling_logits
//                   below); 0 for greedy. This is the behaviour logprob RL records.
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

// The logits of the distribution actually sampled from, over the last dimension of `logits`
// (any leading shape): logits / temperature, then top-k and top-p truncation, the cut
// entries set to kTruncatedLogit (finite, so log_softmax gives a finite logprob and entropy
// sums stay finite; exp of it is exactly 0 in float32). Float32 (float64 stays float64).
// log_softmax of the result is the sampling logprob; the trainer scores with the same
// function so its pi_old equals the behaviour logprob for the same weights. Returns the
// input itself (no copy) when the distribution is the model's own (temperature 1, no
// truncation) or greedy.
constexpr float kTruncatedLogit = -1e9f;
at::Tensor sampling_logits(const at::Tensor& logits, const SamplingConfig& config);
bool is_untempered(const SamplingConfig& config);  // greedy, or T = 1 with no truncation

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
