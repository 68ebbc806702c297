// SpotWatcher over libcurl (easy API, one handle per request; polls are seconds apart).
#include "runtime/spot_watcher.h"

#include <curl/curl.h>

#include <nlohmann/json.hpp>

#include "base/deadline.h"
#include "base/error.h"
#include "base/log.h"

namespace moerl::runtime {
namespace {

struct HttpResult {
  long status = 0;  // 0: no response
  std::string body;
  std::string error;
};

size_t append_body(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

HttpResult http(const std::string& method, const std::string& url, const std::string& header,
                double timeout_seconds) {
  static std::once_flag init;
  std::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  HttpResult r;
  CURL* c = curl_easy_init();
  if (c == nullptr) {
    r.error = "curl_easy_init failed";
    return r;
  }
  curl_slist* headers = curl_slist_append(nullptr, header.c_str());
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_seconds * 1000));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(timeout_seconds * 1000));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");  // metadata is link-local: never via a proxy
  if (method == "PUT") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, 0L);
  }
  CURLcode rc = curl_easy_perform(c);
  if (rc == CURLE_OK) {
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  } else {
    r.error = curl_easy_strerror(rc);
  }
  curl_slist_free_all(headers);
  curl_easy_cleanup(c);
  return r;
}

}  // namespace

void SpotConfig::validate() const {
  if (metadata_url.rfind("http://", 0) != 0 && metadata_url.rfind("https://", 0) != 0) {
    throw Error("spot metadata_url '" + metadata_url + "' is not an http(s) URL",
                "leave the default http://169.254.169.254 on EC2, or point tests at http://127.0.0.1:PORT");
  }
  if (!(poll_seconds > 0) || !(request_timeout_seconds > 0) || token_ttl_seconds < 1 ||
      token_ttl_seconds > 21600) {
    throw Error("spot: poll_seconds=" + std::to_string(poll_seconds) + " request_timeout_seconds=" +
                    std::to_string(request_timeout_seconds) +
                    " token_ttl_seconds=" + std::to_string(token_ttl_seconds) + " out of range",
                "poll and timeout must be > 0 s; the IMDSv2 token TTL must be 1..21600 s");
  }
}

static SpotConfig normalized(SpotConfig c) {
  c.validate();
  while (!c.metadata_url.empty() && c.metadata_url.back() == '/') c.metadata_url.pop_back();
  return c;
}

SpotWatcher::SpotWatcher(SpotConfig config, std::function<void(const SpotNotice&)> on_notice)
    : config_(normalized(std::move(config))), on_notice_(std::move(on_notice)) {}

SpotWatcher::~SpotWatcher() { stop(); }

void SpotWatcher::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { run(); });
}

void SpotWatcher::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string SpotWatcher::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

bool SpotWatcher::fetch_token(std::string* error) {
  HttpResult r = http("PUT", config_.metadata_url + "/latest/api/token",
                      "X-aws-ec2-metadata-token-ttl-seconds: " +
                          std::to_string(config_.token_ttl_seconds),
                      config_.request_timeout_seconds);
  if (r.status != 200 || r.body.empty()) {
    *error = "IMDSv2 token PUT: " + (r.status ? "HTTP " + std::to_string(r.status) : r.error);
    return false;
  }
  std::lock_guard<std::mutex> lock(mu_);
  token_ = r.body;
  token_at_ = now_seconds();
  return true;
}

std::optional<SpotNotice> SpotWatcher::poll_once() {
  ++num_polls_;
  std::string error;
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::string token;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Refresh at half the TTL so a token never expires between PUT and GET.
      if (!token_.empty() && now_seconds() - token_at_ < config_.token_ttl_seconds / 2.0) token = token_;
    }
    if (token.empty()) {
      if (!fetch_token(&error)) break;
      std::lock_guard<std::mutex> lock(mu_);
      token = token_;
    }
    HttpResult r = http("GET", config_.metadata_url + "/latest/meta-data/spot/instance-action",
                        "X-aws-ec2-metadata-token: " + token, config_.request_timeout_seconds);
    if (r.status == 404) {
      std::lock_guard<std::mutex> lock(mu_);
      last_error_.clear();
      return std::nullopt;
    }
    if (r.status == 401) {  // token expired or revoked: fetch a new one once
      std::lock_guard<std::mutex> lock(mu_);
      token_.clear();
      error = "instance-action GET: HTTP 401";
      continue;
    }
    if (r.status == 200) {
      SpotNotice n;
      n.raw = r.body;
      auto j = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
      if (j.is_object()) {
        n.action = j.value("action", "");
        n.time = j.value("time", "");
      }
      if (n.action.empty()) n.action = "unknown";
      return n;
    }
    error = "instance-action GET: " + (r.status ? "HTTP " + std::to_string(r.status) : r.error);
    break;
  }
  std::lock_guard<std::mutex> lock(mu_);
  last_error_ = error;
  return std::nullopt;
}

void SpotWatcher::run() {
  while (true) {
    std::optional<SpotNotice> n = poll_once();
    if (n) {
      noticed_ = true;
      MOERL_LOG(WARN) << "spot interruption notice: action=" << n->action << " time=" << n->time;
      on_notice_(*n);
      return;
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, std::chrono::duration<double>(config_.poll_seconds), [&] { return stop_; })) {
      return;
    }
  }
}

}  // namespace moerl::runtime
