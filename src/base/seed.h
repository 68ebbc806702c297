// mix_seed: the seed of one sampling call from the job's seed, a stream (who samples: an EP
// rank and a dynamic-sampling round in the sync job, a worker id's hash in a rollout worker)
// and a step (the RL step, or a worker's batch count). One formula for every sampler, so runs
// are reproducible from train.seed alone.
//
//   uint64_t s = mix_seed(cfg.train.seed, 1 + (rank << 32), step);
// Pure function: a SplitMix64 finaliser over a multiply-xor combination of the three inputs.
#pragma once

#include <cstdint>

namespace moerl {

inline uint64_t mix_seed(uint64_t seed, uint64_t stream, uint64_t step) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull ^ (stream + 0x632BE59BD9B4E019ull) * 0xBF58476D1CE4E5B9ull ^ step;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace moerl
