// Starting a role's /metrics server, and the GPU memory gauges it refreshes on each scrape.
#include "job/metrics_endpoint.h"

#ifdef MOERL_WITH_CUDA
#include <ATen/Context.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include <algorithm>

#include "base/log.h"

namespace moerl::job {

void refresh_gpu_memory_gauges(metrics::Registry& registry) {
#ifdef MOERL_WITH_CUDA
  if (!at::hasCUDA()) return;
  const int n = static_cast<int>(c10::cuda::device_count());
  for (int d = 0; d < n; ++d) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(d));
    const metrics::Labels dev = {{"device", std::to_string(d)}};
    // NOTE: index 0 of each stat array is the aggregate over the small and large pools.
    registry.gauge("moerl_gpu_memory_allocated_bytes", "GPU memory held by tensors (CUDA caching allocator).", dev)
        .set(static_cast<double>(stats.allocated_bytes[0].current));
    registry.gauge("moerl_gpu_memory_reserved_bytes", "GPU memory reserved by the CUDA caching allocator.", dev)
        .set(static_cast<double>(stats.reserved_bytes[0].current));
    registry.gauge("moerl_gpu_memory_max_allocated_bytes", "Peak GPU memory held by tensors since start.", dev)
        .set(static_cast<double>(stats.allocated_bytes[0].peak));
  }
#else
  (void)registry;
#endif
}

std::unique_ptr<metrics::MetricsServer> start_metrics_endpoint(const MetricsSection& section, const std::string& role,
                                                               const metrics::Labels& info) {
  if (section.prometheus_port == kPrometheusOff) return nullptr;
  metrics::Registry& reg = metrics::default_registry();
  metrics::Labels labels = info;
  labels["role"] = role;
  reg.gauge("moerl_role_info", "The role this process runs (value 1), with the job's settings as labels.", labels)
      .set(1);
  auto server = std::make_unique<metrics::MetricsServer>(
      reg,
      metrics::MetricsServerOptions{.host = section.prometheus_host, .port = static_cast<int>(section.prometheus_port)},
      [&reg] { refresh_gpu_memory_gauges(reg); });
  MOERL_LOG(INFO) << "metrics: " << role << " serves Prometheus metrics at " << server->url()
                  << (section.prometheus_host == "0.0.0.0" ? " (all interfaces)" : "");
  return server;
}

void finish_metrics_endpoint(const metrics::MetricsServer* endpoint, const MetricsSection& section,
                             const std::string& role, double max_wait_s) {
  const double wait_s = std::min(section.final_scrape_wait_s, max_wait_s);
  if (endpoint == nullptr || wait_s <= 0) return;
  const uint64_t seen = endpoint->scrapes();
  MOERL_LOG(INFO) << "metrics: " << role << " finished; serving " << endpoint->url()
                  << " until Prometheus scrapes the final values (at most " << wait_s << " s)";
  if (!endpoint->wait_for_scrape_after(seen, Deadline::after_seconds(wait_s))) {
    MOERL_LOG(WARN) << "metrics: no Prometheus scrape of " << endpoint->url() << " in " << wait_s
                    << " s; the final values are in metrics.jsonl only (HINT: check the scrape config, or "
                       "set [metrics] final_scrape_wait_s = 0 where nothing scrapes)";
  }
}

}  // namespace moerl::job
