// The Prometheus endpoint of a long-running role: GET /metrics answers the registry's text
// exposition (version 0.0.4), served by cpp-httplib on a background thread. Port 0 asks the
// kernel for a free port; port() says which one was taken.
//
//   metrics::MetricsServer server(metrics::default_registry(), {.host = "0.0.0.0", .port = 9400});
//   MOERL_LOG(INFO) << "metrics: " << server.url();     // http://0.0.0.0:9400/metrics
//   // ... the role runs; the destructor stops the server and joins its thread.
// `before_scrape` (may be empty) runs on the server's thread before each rendering, e.g. to
// refresh gauges that are read on demand (GPU memory); it must be thread-safe.
// A job that ends between two scrapes would lose its final values: scrapes() counts the
// requests of Prometheus-compatible scrapers (they send X-Prometheus-Scrape-Timeout-Seconds;
// curl does not), and wait_for_scrape_after(n, deadline) lets a finished role keep serving
// until one more such scrape has read its final state.
// Thread-safety: the registry is thread-safe; scrapes() and wait_for_scrape_after() may be
// called from any thread; the server object itself has one owner.
// Failure: the port cannot be bound -> moerl::Error(kUnavailable) naming host:port.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/deadline.h"
#include "base/metrics.h"

namespace httplib {
class Server;
}

namespace moerl::metrics {

struct MetricsServerOptions {
  std::string host = "0.0.0.0";  // 127.0.0.1 keeps it on loopback (tests)
  int port = 0;                  // 0: any free port
  std::string path = "/metrics";
};

// Content-Type of the Prometheus text format.
inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

class MetricsServer {
 public:
  MetricsServer(Registry& registry, MetricsServerOptions options, std::function<void()> before_scrape = {});
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const { return port_; }
  // http://HOST:PORT/PATH (with 127.0.0.1 for a wildcard host, so it can be fetched as is).
  std::string url() const;

  // Scrapes by a Prometheus-compatible scraper started so far.
  uint64_t scrapes() const;
  // True once a scrape numbered > `seen` has started (so it renders what was set before the
  // call that read `seen`); false at the deadline.
  bool wait_for_scrape_after(uint64_t seen, Deadline deadline) const;

 private:
  Registry& registry_;
  MetricsServerOptions options_;
  std::function<void()> before_scrape_;
  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
  mutable std::mutex mu_;
  mutable std::condition_variable scraped_;
  uint64_t scrapes_ = 0;  // guarded by mu_
  std::thread thread_;
};

}  // namespace moerl::metrics
