#include "model/cuda/decode_kernels.h"

#include <atomic>

namespace moerl::model::cuda {
namespace {
std::atomic<bool> g_experts{DecodeKernels{}.experts}, g_attention{DecodeKernels{}.attention},
    g_sampling{DecodeKernels{}.sampling};
}  // namespace

void set_decode_kernels(DecodeKernels k) {
  g_experts.store(k.experts, std::memory_order_relaxed);
  g_attention.store(k.attention, std::memory_order_relaxed);
  g_sampling.store(k.sampling, std::memory_order_relaxed);
}

DecodeKernels decode_kernels() {
  return {g_experts.load(std::memory_order_relaxed), g_attention.load(std::memory_order_relaxed),
          g_sampling.load(std::memory_order_relaxed)};
}

}  // namespace moerl::model::cuda
