// Timing helpers for the GPU benchmarks: CUDA events on the current stream, median of
// repeats after warm-up; a tiny JSON writer (flat key -> number).
#pragma once

#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace moerl::gpubench {

inline void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// Median milliseconds of fn over `reps` timed runs after `warmup` untimed ones.
inline double median_ms(const std::function<void()>& fn, int warmup = 3, int reps = 20) {
  for (int i = 0; i < warmup; ++i) fn();
  cuda_ok(cudaDeviceSynchronize(), "sync");
  cudaStream_t s = c10::cuda::getCurrentCUDAStream().stream();
  std::vector<double> ms;
  cudaEvent_t a, b;
  cuda_ok(cudaEventCreate(&a), "event");
  cuda_ok(cudaEventCreate(&b), "event");
  for (int i = 0; i < reps; ++i) {
    cuda_ok(cudaEventRecord(a, s), "record");
    fn();
    cuda_ok(cudaEventRecord(b, s), "record");
    cuda_ok(cudaEventSynchronize(b), "sync");
    float t = 0;
    cuda_ok(cudaEventElapsedTime(&t, a, b), "elapsed");
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

struct Json {
  std::map<std::string, double> v;
  void set(const std::string& k, double x) {
    v[k] = x;
    std::printf("  %-44s %12.3f\n", k.c_str(), x);
    std::fflush(stdout);
  }
  void write(const std::string& path) const {
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) return;
    std::fprintf(f, "{\n");
    size_t i = 0;
    for (const auto& [k, x] : v) std::fprintf(f, "  \"%s\": %.6g%s\n", k.c_str(), x, ++i < v.size() ? "," : "");
    std::fprintf(f, "}\n");
    std::fclose(f);
  }
};

}  // namespace moerl::gpubench
