// /metrics over cpp-httplib: one GET route, a small thread pool, bounded socket timeouts.
#include "base/metrics_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "base/log.h"

namespace moerl::metrics {

MetricsServer::MetricsServer(Registry& registry, MetricsServerOptions options, std::function<void()> before_scrape)
    : registry_(registry),
      options_(std::move(options)),
      before_scrape_(std::move(before_scrape)),
      server_(std::make_unique<httplib::Server>()) {
  if (options_.port < 0 || options_.port > 65535) {
    throw Error("metrics: port " + std::to_string(options_.port) + " is not a TCP port",
                "use 0 (any free port) or 1..65535", ErrorCode::kInvalidInput);
  }
  // Scrapes are rare and small: two workers, and no client can hold one for long.
  server_->new_task_queue = [] { return new httplib::ThreadPool(2); };
  server_->set_read_timeout(std::chrono::seconds(5));
  server_->set_write_timeout(std::chrono::seconds(5));
  server_->set_keep_alive_timeout(5);
  // NOTE: httplib's default also sets SO_REUSEPORT, which lets a second process bind the same
  // port and silently take half the scrapes; a taken port must be an error instead.
  server_->set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server_->Get(options_.path, [this](const httplib::Request& req, httplib::Response& res) {
    if (req.has_header("X-Prometheus-Scrape-Timeout-Seconds")) {
      std::lock_guard<std::mutex> lock(mu_);
      ++scrapes_;
      scraped_.notify_all();
    }
    try {
      if (before_scrape_) before_scrape_();
      res.set_content(registry_.to_prometheus(), kPrometheusContentType);
    } catch (const std::exception& e) {
      res.status = 500;
      res.set_content(std::string("metrics: ") + e.what() + "\n", "text/plain");
    }
  });
  if (options_.port == 0) {
    port_ = server_->bind_to_any_port(options_.host);
  } else if (server_->bind_to_port(options_.host, options_.port)) {
    port_ = options_.port;
  }
  if (port_ <= 0) {
    throw Error("metrics: cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                    " for the Prometheus endpoint",
                "another process holds the port, or the host is not an address of this machine: set "
                "[metrics] prometheus_port to a free port (0 picks one) and prometheus_host to 0.0.0.0 or 127.0.0.1",
                ErrorCode::kUnavailable);
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
}

MetricsServer::~MetricsServer() {
  // NOTE: stop() before the listen loop has started would be lost and leave the thread
  // running; wait (bounded) until it runs.
  for (int i = 0; i < 500 && !server_->is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

uint64_t MetricsServer::scrapes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return scrapes_;
}

bool MetricsServer::wait_for_scrape_after(uint64_t seen, Deadline deadline) const {
  std::unique_lock<std::mutex> lock(mu_);
  while (scrapes_ <= seen) {
    if (deadline.expired()) return false;
    scraped_.wait_for(lock, std::chrono::milliseconds(static_cast<int64_t>(
                                std::min(100.0, 1000.0 * deadline.remaining_seconds()) + 1)));
  }
  return true;
}

std::string MetricsServer::url() const {
  const std::string host = options_.host == "0.0.0.0" || options_.host.empty() ? "127.0.0.1" : options_.host;
  return "http://" + host + ":" + std::to_string(port_) + options_.path;
}

}  // namespace moerl::metrics
