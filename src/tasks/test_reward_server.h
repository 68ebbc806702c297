// Test-only: examples/reward_server.py (Debian's python3, standard library) started on
// 127.0.0.1 with a kernel-chosen port, stopped by the destructor. Used by the tasks tests and
// the end-to-end tests of the "http" reward.
//
//   RewardServer srv({"--format-reward", "0.2", "--fail-first", "2"});
//   srv.url();              // http://127.0.0.1:PORT/score
//   srv.stats()["requests"] // POSTs seen so far (GET /stats)
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/env.h"
#include "base/error.h"
#include "base/http_client.h"
#include "base/subprocess.h"

namespace moerl::tasks::testing {

class RewardServer {
 public:
  explicit RewardServer(const std::vector<std::string>& flags = {}) {
    static int count = 0;
    log_ = (std::filesystem::temp_directory_path() /
            ("moerl-reward-server-" + std::to_string(::getpid()) + "-" + std::to_string(count++) + ".log"))
               .string();
    std::vector<std::string> argv = {"python3", "-u", script(), "--host", "127.0.0.1", "--port", "0"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    proc_ = Subprocess::spawn(argv, {.stdout_to = Redirect::file(log_, FileMode::kTruncate),
                                     .stderr_to = Redirect::to_stdout(),
                                     .parent_death_signal = SIGKILL});
    const std::string marker = "listening on ";
    for (Deadline d = Deadline::after_seconds(30); !d.expired();) {
      std::ifstream in(log_);
      std::string line;
      if (std::getline(in, line) && line.find(marker) != std::string::npos) {
        url_ = line.substr(line.find(marker) + marker.size());
        break;
      }
      if (!proc_.running()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (url_.empty()) throw Error("test reward server did not start: " + output(), "is python3 installed?");
  }
  ~RewardServer() {
    proc_.stop(5.0);
    std::filesystem::remove(log_);
  }
  RewardServer(const RewardServer&) = delete;
  RewardServer& operator=(const RewardServer&) = delete;

  const std::string& url() const { return url_; }
  nlohmann::json stats() const {
    http::HttpClient c;
    std::string base = url_.substr(0, url_.rfind('/'));
    http::HttpResponse r = c.perform({.method = "GET", .url = base + "/stats", .timeout_s = 10});
    EXPECT_EQ(r.status, 200) << r.transport_error;
    return r.status == 200 ? nlohmann::json::parse(r.body) : nlohmann::json::object();
  }
  std::string output() const {
    std::ifstream in(log_);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  static std::string script() { return env::get_or("MOERL_SOURCE_DIR", ".") + "/examples/reward_server.py"; }

 private:
  std::string log_;
  std::string url_;
  Subprocess proc_;
};

}  // namespace moerl::tasks::testing
