// SpotWatcher: polls the EC2 instance-metadata service (IMDSv2) for a Spot interruption
// notice and calls back once when one appears (then stops polling). Token flow:
//   PUT  {base}/latest/api/token              X-aws-ec2-metadata-token-ttl-seconds: <ttl>
//   GET  {base}/latest/meta-data/spot/instance-action   X-aws-ec2-metadata-token: <token>
//        404 = no notice; 200 = {"action": "terminate", "time": "2026-...Z"}; 401 = token expired
//
//   SpotWatcher spot({.metadata_url = "http://127.0.0.1:8111", .poll_seconds = 0.2},
//                    [&](const SpotNotice& n) { drain.request_drain("spot " + n.action); });
//   spot.start();
// Thread-safe; the callback runs on the watcher's thread. Unreachable metadata (not on EC2)
// is not an error: polling goes on and last_error() says why nothing was read.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace moerl::runtime {

struct SpotConfig {
  std::string metadata_url = "http://169.254.169.254";  // tests point this at 127.0.0.1
  double poll_seconds = 5.0;
  int token_ttl_seconds = 21600;
  double request_timeout_seconds = 2.0;
  void validate() const;  // throws moerl::Error naming the bad field
};

struct SpotNotice {
  std::string action;  // "terminate", "stop" or "hibernate"
  std::string time;    // ISO-8601 UTC, as served
  std::string raw;     // the response body
};

class SpotWatcher {
 public:
  SpotWatcher(SpotConfig config, std::function<void(const SpotNotice&)> on_notice);
  ~SpotWatcher();  // stops the thread
  SpotWatcher(const SpotWatcher&) = delete;
  SpotWatcher& operator=(const SpotWatcher&) = delete;

  void start();
  void stop();
  // One token + GET round; nullopt when there is no notice or metadata is unreachable.
  std::optional<SpotNotice> poll_once();
  std::string last_error() const;
  int64_t num_polls() const { return num_polls_.load(); }
  bool noticed() const { return noticed_.load(); }

 private:
  void run();
  bool fetch_token(std::string* error);

  const SpotConfig config_;  // immutable after construction
  const std::function<void(const SpotNotice&)> on_notice_;
  mutable std::mutex mu_;          // guards token_, token_at_, last_error_, stop_
  std::condition_variable cv_;
  std::string token_;
  double token_at_ = 0;
  std::string last_error_;
  bool stop_ = false;
  std::atomic<int64_t> num_polls_{0};
  std::atomic<bool> noticed_{false};
  std::thread thread_;
};

}  // namespace moerl::runtime
