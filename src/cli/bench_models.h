// Pieces shared by the model benchmarks (`moerl bench gen`, `moerl bench train`): a model of a
// config.json geometry with random weights drawn on the device, and the device's physical
// ceilings measured in the same run (copy rate, matmul rate), plus the run's peak memory.
//
//   model::Model m = random_model(cfg, device, at::kBFloat16, /*seed=*/7);
//   double bytes_per_s = copy_rate(device, int64_t{1} << 31);
//   double flops_per_s = matmul_rate(device, at::kBFloat16, 8192);
// Not thread-safe (they seed and time the device); failures are libtorch's exceptions.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <cstdint>

#include "io/hf_config.h"
#include "model/model.h"

namespace moerl::cli {

double seconds_since(std::chrono::steady_clock::time_point t0);

// Random weights (N(0, 0.02), norms 1) drawn where the model runs: model::init_random draws
// float32 on the host, 120 GB for a 30B-parameter model.
model::Model random_model(const io::HfConfig& c, at::Device device, at::ScalarType dtype, uint64_t seed);

// Device copy rate in bytes/s (read + written), best of 5 copies of `bytes`.
double copy_rate(at::Device device, int64_t bytes);

// Dense matmul rate in FLOP/s (2 n^3 per product) of [n,n] x [n,n] in `dtype`, best of 5.
double matmul_rate(at::Device device, at::ScalarType dtype, int64_t n);

// Peak bytes of the run so far: the CUDA caching allocator's peak of tensor memory on a GPU
// device (since reset_peak_memory), the process's max RSS on the CPU (never reset).
int64_t peak_memory_bytes(at::Device device);
void reset_peak_memory(at::Device device);
// What peak_memory_bytes measures on `device`, for the report.
const char* peak_memory_kind(at::Device device);

}  // namespace moerl::cli
