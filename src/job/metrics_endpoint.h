// The Prometheus endpoint of a long-running role (`moerl train`, `moerl trainer`, `moerl
// rollout`): [metrics] prometheus_port >= 0 serves the process's registry
// (metrics::default_registry) at /metrics and logs its URL; GPU memory gauges (CUDA builds,
// model on a GPU) are refreshed before each scrape; moerl_role_info names the role.
//
//   std::unique_ptr<metrics::MetricsServer> ep = start_metrics_endpoint(cfg.metrics, "rollout", labels);
//   // null when prometheus_port = -1 (the default)
//   ... the role's work ...
//   finish_metrics_endpoint(ep.get(), cfg.metrics, "rollout");   // its final values get scraped
// Failure: the port cannot be bound -> moerl::Error(kUnavailable) naming it.
#pragma once

#include <memory>
#include <string>

#include "base/metrics.h"
#include "base/metrics_server.h"
#include "job/metrics_config.h"

namespace moerl::job {

// `info` labels go on the moerl_role_info gauge (value 1) beside role=`role`.
std::unique_ptr<metrics::MetricsServer> start_metrics_endpoint(const MetricsSection& section, const std::string& role,
                                                               const metrics::Labels& info = {});

// At the end of a role: serves until a Prometheus scrape has read the final values, at most
// min(section.final_scrape_wait_s, max_wait_s) seconds (a short job that ended between two
// scrapes would otherwise vanish from Prometheus with its last step). Null `endpoint`: no-op.
void finish_metrics_endpoint(const metrics::MetricsServer* endpoint, const MetricsSection& section,
                             const std::string& role, double max_wait_s = 1e9);

// Sets moerl_gpu_memory_{allocated,reserved,max_allocated}_bytes{device} from the CUDA caching
// allocator; does nothing in a build without CUDA or on a machine without a GPU.
void refresh_gpu_memory_gauges(metrics::Registry& registry);

}  // namespace moerl::job
