// Test-only: Debian's `prometheus` server on 127.0.0.1 with a static scrape config (one job per
// target), its HTTP query API, and `promtool check metrics` on an exposition.
//
//   PrometheusServer prom(dir, {{"moerl-sync", sync_port}});
//   std::optional<double> v = prom.instant("last_over_time(moerl_rl_step{job=\"moerl-sync\"}[10m])");
// The destructor stops the server. Failure to start within 60 s is a moerl::Error.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/http_client.h"
#include "base/subprocess.h"
#include "runtime/redis_server.h"

namespace moerl::e2e {

inline std::string url_encode(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

inline http::HttpResponse http_get(const std::string& url) {
  http::HttpClient c;
  return c.perform({.method = "GET", .url = url, .timeout_s = 10});
}

class PrometheusServer {
 public:
  // targets: (job name, port on 127.0.0.1), scraped every 200 ms.
  PrometheusServer(const std::string& dir, const std::vector<std::pair<std::string, int>>& targets) {
    std::filesystem::create_directories(dir + "/data");
    std::ofstream cfg(dir + "/prometheus.yml");
    cfg << "global:\n  scrape_interval: 200ms\n  scrape_timeout: 150ms\nscrape_configs:\n";
    for (const auto& [job, port] : targets) {
      cfg << "  - job_name: " << job << "\n    metrics_path: /metrics\n    static_configs:\n"
          << "      - targets: ['127.0.0.1:" << port << "']\n";
    }
    cfg.close();
    port_ = runtime::pick_free_loopback_port();
    proc_ = Subprocess::spawn({"prometheus", "--config.file=" + dir + "/prometheus.yml",
                               "--storage.tsdb.path=" + dir + "/data",
                               "--web.listen-address=127.0.0.1:" + std::to_string(port_), "--log.level=warn"},
                              {.stdout_to = Redirect::file(dir + "/prometheus.log", FileMode::kAppend),
                               .stderr_to = Redirect::to_stdout(),
                               .parent_death_signal = SIGKILL});
    for (Deadline d = Deadline::after_seconds(60); !d.expired(); std::this_thread::sleep_for(std::chrono::milliseconds(100))) {
      if (!proc_.running()) break;
      if (http_get(base() + "/-/ready").status == 200) return;
    }
    throw Error("prometheus did not become ready on 127.0.0.1:" + std::to_string(port_) + " (log: " + dir +
                    "/prometheus.log)",
                "scripts/install-deps.sh installs the Debian prometheus package");
  }
  ~PrometheusServer() { proc_.stop(10.0); }
  PrometheusServer(const PrometheusServer&) = delete;
  PrometheusServer& operator=(const PrometheusServer&) = delete;

  std::string base() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // The API's answer to an instant query (the whole JSON).
  nlohmann::json query(const std::string& promql) const {
    http::HttpResponse r = http_get(base() + "/api/v1/query?query=" + url_encode(promql));
    EXPECT_EQ(r.status, 200) << promql << ": " << r.transport_error << r.body;
    return r.status == 200 ? nlohmann::json::parse(r.body) : nlohmann::json::object();
  }
  // The value of the first series an instant query returns; nullopt when it returns none.
  std::optional<double> instant(const std::string& promql) const {
    nlohmann::json j = query(promql);
    if (j.value("status", "") != "success" || j["data"]["result"].empty()) return std::nullopt;
    return std::stod(j["data"]["result"][0]["value"][1].get<std::string>());
  }
  // Polls `promql` until it returns a series (or the deadline passes).
  std::optional<double> wait_for(const std::string& promql, double seconds) const {
    for (Deadline d = Deadline::after_seconds(seconds); !d.expired(); std::this_thread::sleep_for(std::chrono::milliseconds(200))) {
      if (auto v = instant(promql)) return v;
    }
    return std::nullopt;
  }

 private:
  int port_ = 0;
  Subprocess proc_;
};

// promtool's verdict on an exposition: "" when it passes, else its findings.
inline std::string promtool_findings(const std::string& exposition, const std::string& scratch_file) {
  std::ofstream(scratch_file) << exposition;
  SpawnOptions o;
  o.stdin_from = Redirect::file(scratch_file, FileMode::kAppend);
  CapturedRun r = run_captured({"promtool", "check", "metrics"}, Deadline::after_seconds(60), o);
  std::remove(scratch_file.c_str());
  return r.status == 0 && r.output.empty() ? "" : "status " + std::to_string(r.status) + ": " + r.output;
}

}  // namespace moerl::e2e
