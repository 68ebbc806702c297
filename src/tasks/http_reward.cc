// The "http" reward: batches POSTed on a few threads under one process-wide concurrency limit,
// retries with exponential backoff, the response checked item by item.
#include "tasks/http_reward.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/check.h"
#include "base/deadline.h"
#include "base/error.h"
#include "base/log.h"
#include "base/metrics.h"

namespace moerl::tasks {

using nlohmann::json;

namespace {

constexpr double kMaxBackoffSeconds = 30;
constexpr size_t kBodyExcerpt = 300;

metrics::Registry& reg() { return metrics::default_registry(); }

std::string excerpt(const std::string& body) {
  std::string s = body.substr(0, kBodyExcerpt);
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return body.size() > kBodyExcerpt ? s + "..." : s;
}

bool retryable(const http::HttpResponse& r) { return r.status == 0 || r.status == 429 || r.status >= 500; }

std::string describe(const http::HttpResponse& r) {
  if (r.status == 0) return "no answer (" + r.transport_error + ")";
  std::string s = "HTTP " + std::to_string(r.status);
  return r.body.empty() ? s : s + ": " + excerpt(r.body);
}

const char* kFormatHint =
    "the service must answer POST with a JSON object {\"rewards\": [one number per item]} (or \"scores\"), "
    "see docs/formats/reward_http.md";

}  // namespace

HttpRewardConfig read_http_reward_config(ConfigTable& t, const std::string& task_name) {
  HttpRewardConfig c;
  c.url = t.required_string("reward_url");
  if (c.url.rfind("http://", 0) != 0 && c.url.rfind("https://", 0) != 0) {
    throw Error("config: " + t.path() + ".reward_url = \"" + c.url + "\" is not an http:// or https:// URL",
                "give the scoring endpoint, e.g. reward_url = \"http://127.0.0.1:8000/score\"");
  }
  c.batch_size = t.integer("reward_batch_size", c.batch_size, {1, 1e6});
  c.concurrency = t.integer("reward_concurrency", c.concurrency, {1, 1024});
  c.timeout_seconds = t.number("reward_timeout_seconds", c.timeout_seconds, {0.01, 86400});
  c.retries = t.integer("reward_retries", c.retries, {0, 100});
  c.backoff_seconds = t.number("reward_backoff_seconds", c.backoff_seconds, {0, kMaxBackoffSeconds});
  if (t.has("reward_on_error")) c.on_error = t.number("reward_on_error", 0.0, {-1e12, 1e12});
  c.task_name = task_name;
  return c;
}

struct HttpRewardFn::Batch {
  size_t begin = 0, end = 0;  // items [begin, end)
  const std::vector<TaskItem>* items = nullptr;
  const std::vector<std::string>* completions = nullptr;
  const std::vector<int64_t>* sample = nullptr;  // index of each item among those with its id
  std::vector<double>* rewards = nullptr;        // written at [begin, end)
  std::string first_item() const { return (*items)[begin].id; }
};

HttpRewardFn::HttpRewardFn(HttpRewardConfig config)
    : cfg_(std::move(config)), slots_(static_cast<std::ptrdiff_t>(cfg_.concurrency)) {
  // Register the families up front, so a scrape shows them before the first request.
  reg().counter("moerl_reward_http_items_total", "Items scored by the HTTP reward service.");
  reg().counter("moerl_reward_http_retries_total", "Requests to the reward service that were retried.");
  reg().counter("moerl_reward_http_fallback_items_total",
                "Items given [task] reward_on_error after their batch kept failing.");
  reg().gauge("moerl_reward_http_in_flight", "Requests to the reward service in flight.");
}

RewardRange HttpRewardFn::range() const {
  return {-std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
}

std::vector<double> HttpRewardFn::score(const std::vector<TaskItem>& items, const std::vector<std::string>& completions) {
  MOERL_CHECK_EQ(items.size(), completions.size());
  std::vector<double> rewards(items.size(), 0.0);
  if (items.empty()) return rewards;
  std::vector<int64_t> sample(items.size());
  std::map<std::string, int64_t> seen;
  for (size_t i = 0; i < items.size(); ++i) sample[i] = seen[items[i].id]++;

  const size_t B = static_cast<size_t>(cfg_.batch_size);
  std::vector<Batch> batches;
  for (size_t b = 0; b < items.size(); b += B) {
    batches.push_back({b, std::min(items.size(), b + B), &items, &completions, &sample, &rewards});
  }
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mu;
  auto work = [&] {
    for (size_t i; !failed.load() && (i = next.fetch_add(1)) < batches.size();) {
      try {
        score_batch(batches[i]);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  };
  const size_t num_threads = std::min(batches.size(), static_cast<size_t>(cfg_.concurrency));
  std::vector<std::thread> threads;
  for (size_t t = 1; t < num_threads; ++t) threads.emplace_back(work);
  work();  // this thread takes a share too
  for (auto& th : threads) th.join();
  if (error) std::rethrow_exception(error);
  reg().counter("moerl_reward_http_items_total", "").inc(static_cast<double>(items.size()));
  return rewards;
}

void HttpRewardFn::score_batch(Batch& b) {
  const size_t n = b.end - b.begin;
  json body = {{"query", json::array()}, {"prompts", json::array()}, {"labels", json::array()},
               {"responses", json::array()}, {"items", json::array()}};
  for (size_t i = b.begin; i < b.end; ++i) {
    const TaskItem& it = (*b.items)[i];
    const std::string& resp = (*b.completions)[i];
    body["query"].push_back(it.prompt + resp);
    body["prompts"].push_back(it.prompt);
    body["labels"].push_back(it.answer);
    body["responses"].push_back(resp);
    body["items"].push_back({{"id", it.id}, {"prompt", it.prompt}, {"response", resp}, {"answer", it.answer},
                             {"metadata", {{"task", cfg_.task_name}, {"sample", (*b.sample)[i]}}}});
  }
  // NOTE: invalid UTF-8 in a generated response (a byte-level tokenizer can emit it) is
  // replaced, not fatal: the service sees U+FFFD there.
  const std::string payload = body.dump(-1, ' ', false, json::error_handler_t::replace);
  const std::string where = "item '" + b.first_item() + "'" +
                            (n > 1 ? " (batch of " + std::to_string(n) + " items up to '" + (*b.items)[b.end - 1].id + "')"
                                   : "");
  http::HttpRequest req;
  req.method = "POST";
  req.url = cfg_.url;
  req.headers = {{"Content-Type", "application/json"}, {"Accept", "application/json"}};
  req.body = payload;
  req.timeout_s = cfg_.timeout_seconds;
  req.connect_timeout_s = std::min(cfg_.timeout_seconds, 10.0);
  req.stall_timeout_s = cfg_.timeout_seconds;  // a slow scorer sends nothing until it is done
  metrics::Gauge& in_flight = reg().gauge("moerl_reward_http_in_flight", "");
  metrics::Histogram& latency = reg().histogram("moerl_reward_http_request_seconds",
                                                "Time of one request to the reward service.",
                                                metrics::exponential_buckets(0.005, 4, 9));
  std::string last;
  const int64_t attempts = cfg_.retries + 1;
  for (int64_t attempt = 0; attempt < attempts; ++attempt) {
    if (attempt > 0) {
      reg().counter("moerl_reward_http_retries_total", "").inc();
      const double wait = std::min(kMaxBackoffSeconds, cfg_.backoff_seconds * std::pow(2.0, attempt - 1));
      std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    }
    http::HttpResponse r;
    {
      slots_.acquire();
      struct Slot {  // released however perform() returns
        std::counting_semaphore<>& s;
        metrics::Gauge& g;
        ~Slot() { g.add(-1), s.release(); }
      } slot{slots_, in_flight};
      in_flight.add(1);
      const double t0 = now_seconds();
      r = http_.perform(req);
      latency.observe(now_seconds() - t0);
    }
    reg().counter("moerl_reward_http_requests_total", "Requests to the reward service, by HTTP status (0: no answer).",
                  {{"code", std::to_string(r.status)}})
        .inc();
    if (r.status >= 200 && r.status < 300) {
      json ans;
      try {
        ans = json::parse(r.body);
      } catch (const json::exception& e) {
        throw Error("reward http: " + cfg_.url + " answered " + where + " with a body that is not JSON (" +
                        std::string(e.what()) + "): " + excerpt(r.body),
                    kFormatHint);
      }
      const char* key = ans.is_object() && ans.contains("rewards") ? "rewards" : "scores";
      if (!ans.is_object() || !ans.contains(key) || !ans[key].is_array() || ans[key].size() != n) {
        throw Error("reward http: " + cfg_.url + " answered " + where + " without a list of " + std::to_string(n) +
                        " rewards: " + excerpt(r.body),
                    kFormatHint);
      }
      for (size_t k = 0; k < n; ++k) {
        const json& v = ans[key][k];
        if (!v.is_number() || !std::isfinite(v.get<double>())) {
          throw Error("reward http: " + cfg_.url + " gave item '" + (*b.items)[b.begin + k].id + "' the reward " +
                          v.dump() + ", not a finite number",
                      kFormatHint);
        }
        (*b.rewards)[b.begin + k] = v.get<double>();
      }
      // extra_logs: NAME -> one number per item, or one number for the batch. Anything else is
      // a log moerl cannot plot and is left out.
      if (ans.contains("extra_logs") && ans["extra_logs"].is_object()) {
        std::lock_guard<std::mutex> lock(mu_);
        for (auto it = ans["extra_logs"].begin(); it != ans["extra_logs"].end(); ++it) {
          const json& v = it.value();
          double sum = 0;
          if (v.is_number()) {
            sum = v.get<double>() * static_cast<double>(n);
          } else if (v.is_array() && v.size() == n &&
                     std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_number(); })) {
            for (const json& x : v) sum += x.get<double>();
          } else {
            continue;
          }
          if (!std::isfinite(sum)) continue;
          auto& acc = extra_[it.key()];
          acc.first += sum;
          acc.second += static_cast<int64_t>(n);
          reg().gauge("moerl_reward_extra", "Mean of a named sub-score (extra_logs) over the last batch.",
                      {{"name", it.key()}})
              .set(sum / static_cast<double>(n));
        }
      }
      return;
    }
    last = describe(r);
    if (!retryable(r)) {
      throw Error("reward http: " + cfg_.url + " rejected " + where + ": " + last,
                  std::string(kFormatHint) + "; a 4xx answer is not retried");
    }
    MOERL_LOG(DEBUG) << "reward http: " << cfg_.url << " attempt " << attempt + 1 << "/" << attempts << " for "
                     << where << ": " << last;
  }
  if (cfg_.on_error) {
    for (size_t i = b.begin; i < b.end; ++i) (*b.rewards)[i] = *cfg_.on_error;
    reg().counter("moerl_reward_http_fallback_items_total", "").inc(static_cast<double>(n));
    MOERL_LOG(WARN) << "reward http: " << cfg_.url << " failed " << attempts << " times for " << where
                    << " (last: " << last << "); scored with reward_on_error = " << *cfg_.on_error;
    return;
  }
  throw Error("reward http: POST " + cfg_.url + " failed " + std::to_string(attempts) + " times for " + where +
                  "; last: " + last,
              "check that the reward service is up and reachable from this machine; raise [task] reward_retries or "
              "reward_timeout_seconds for a slow service, or set reward_on_error = <reward> to score such items with "
              "a fallback instead of stopping",
              ErrorCode::kUnavailable);
}

std::map<std::string, double> HttpRewardFn::drain_extra_logs() {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, double> out;
  for (const auto& [name, acc] : extra_) out[name] = acc.first / static_cast<double>(std::max<int64_t>(1, acc.second));
  extra_.clear();
  return out;
}

}  // namespace moerl::tasks
