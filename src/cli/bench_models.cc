#include "cli/bench_models.h"

#include <sys/resource.h>

#include <algorithm>

#include "job/gpu_paths.h"
#include "model/archs/arch.h"

namespace moerl::cli {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

model::Model random_model(const io::HfConfig& c, at::Device device, at::ScalarType dtype, uint64_t seed) {
  const model::Arch& arch = model::find_arch(c.model_type);
  const model::ExpertRange all{0, c.num_experts};
  at::manual_seed(seed);
  auto o = at::TensorOptions().dtype(dtype).device(device);
  model::Params p;
  for (const model::ParamSpec& s : arch.param_specs(c, all)) {
    switch (s.init) {
      case model::Init::kNormal: p[s.name] = at::empty(s.shape, o).normal_(0.0, 0.02); break;
      case model::Init::kOnes: p[s.name] = at::ones(s.shape, o); break;
      case model::Init::kZeros: p[s.name] = at::zeros(s.shape, o); break;
    }
  }
  arch.canonicalize(c, all, p);
  return model::Model(c, std::move(p), {dtype, device, nullptr});
}

// NOTE: the item() reads wait for the device, so each time covers the work it follows.
double copy_rate(at::Device device, int64_t bytes) {
  at::Tensor a = at::ones({bytes}, at::TensorOptions().dtype(at::kByte).device(device)), b = at::empty_like(a);
  double best = 1e30;
  for (int i = 0; i < 6; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    b.copy_(a);
    (void)b[bytes - 1].item<uint8_t>();
    if (i > 0) best = std::min(best, seconds_since(t0));
  }
  return 2.0 * static_cast<double>(bytes) / best;
}

double matmul_rate(at::Device device, at::ScalarType dtype, int64_t n) {
  auto o = at::TensorOptions().dtype(dtype).device(device);
  at::Tensor a = at::randn({n, n}, o), b = at::randn({n, n}, o), c = at::empty({n, n}, o);
  double best = 1e30;
  for (int i = 0; i < 6; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    at::mm_out(c, a, b);
    (void)c[n - 1][n - 1].item<float>();
    if (i > 0) best = std::min(best, seconds_since(t0));  // the first call warms up the library
  }
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / best;
}

int64_t peak_memory_bytes(at::Device device) {
  if (device.is_cuda()) return job::gpu_peak_allocated_bytes();
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;  // Linux reports kilobytes
}

void reset_peak_memory(at::Device device) {
  if (device.is_cuda()) job::reset_gpu_peak_allocated();
}

const char* peak_memory_kind(at::Device device) {
  return device.is_cuda() ? "cuda_caching_allocator_peak_allocated" : "process_max_rss";
}

}  // namespace moerl::cli
