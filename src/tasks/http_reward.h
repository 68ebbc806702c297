// Reward kind "http": rewards from the user's own service. Items are POSTed in batches as
// JSON to [task] reward_url and answered with one reward per item (request and response in
// docs/formats/reward_http.md; compatible with OpenRLHF `remote_rm_url` services: "query",
// "prompts", "labels" in, "rewards" or "scores" and optional "extra_logs" out).
//
//   [task]
//   reward = "http"
//   reward_url = "http://127.0.0.1:8000/score"
//   reward_concurrency = 4          # requests in flight at once (for all callers together)
//   reward_timeout_seconds = 60     # deadline of one request
//   reward_retries = 3              # after the first attempt, on 5xx / 429 / timeouts / refused
//   reward_on_error = 0.0           # optional: the reward of items whose batch kept failing
//
// Named sub-scores the service sends back (extra_logs) are averaged per batch into the
// process's Prometheus registry (moerl_reward_extra{name}) and over the items since the
// last drain_extra_logs() (the sync job puts them in metrics.jsonl as reward_extra.NAME).
// Thread-safety: score() may be called from many threads; the concurrency limit holds over
// all of them. Failures: a batch still failing after its retries is moerl::Error(kUnavailable)
// naming the URL and the batch's first item, or gets reward_on_error when that is set; a 4xx
// answer or a malformed one is moerl::Error(kInvalidInput) at once (never retried, never a
// fallback: a service that rejects the format needs fixing, not hiding).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <semaphore>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/http_client.h"
#include "tasks/reward_fn.h"

namespace moerl::tasks {

struct HttpRewardConfig {
  std::string url;
  int64_t batch_size = 64;      // items per request
  int64_t concurrency = 4;      // requests in flight, process-wide for this reward
  double timeout_seconds = 60;  // one request (connect + answer)
  int64_t retries = 3;          // extra attempts for a retryable failure
  double backoff_seconds = 0.5; // before retry k: backoff * 2^k, at most 30 s
  std::optional<double> on_error;  // fallback reward; unset: a failing batch is an error
  std::string task_name;        // sent in each item's metadata
};

// Reads the reward_* keys of [task] (reward_url required, http:// or https://).
HttpRewardConfig read_http_reward_config(ConfigTable& table, const std::string& task_name);

class HttpRewardFn final : public RewardFn {
 public:
  explicit HttpRewardFn(HttpRewardConfig config);
  std::string name() const override { return "http"; }
  std::vector<double> score(const std::vector<TaskItem>& items, const std::vector<std::string>& completions) override;
  RewardRange range() const override;  // unbounded: the service decides
  std::map<std::string, double> drain_extra_logs() override;
  const HttpRewardConfig& config() const { return cfg_; }

 private:
  struct Batch;
  void score_batch(Batch& b);

  const HttpRewardConfig cfg_;
  http::HttpClient http_;
  std::counting_semaphore<> slots_;  // requests in flight
  std::mutex mu_;
  std::map<std::string, std::pair<double, int64_t>> extra_;  // name -> (sum, count); guarded by mu_
};

}  // namespace moerl::tasks
