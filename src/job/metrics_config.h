// [metrics] of the job config: where a role's metrics go besides metrics.jsonl.
//
//   [metrics]
//   prometheus_port = 9400     # -1 (default): no /metrics; 0: any free port, logged
//   prometheus_host = "0.0.0.0"
//   final_scrape_wait_s = 30   # a finished role serves until one more scrape reads its end
//   tensorboard = true         # RUN_DIR/tb/events.out.tfevents.<time>.<host>
// Plain data, read once by read_metrics_section (job/run_metrics.cc).
#pragma once

#include <cstdint>
#include <string>

#include "base/config.h"

namespace moerl::job {

inline constexpr int64_t kPrometheusOff = -1;

struct MetricsSection {
  int64_t prometheus_port = kPrometheusOff;  // -1 off, 0 any free port, else the port
  std::string prometheus_host = "0.0.0.0";
  double final_scrape_wait_s = 30;  // 0: exit without waiting for a last scrape
  bool tensorboard = false;
};

// Reads [metrics] (and calls done()); errors name the key.
MetricsSection read_metrics_section(ConfigTable t);

}  // namespace moerl::job
