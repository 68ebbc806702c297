// libcurl easy handles, pooled for connection reuse; one perform() per attempt.
#include "base/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>

#include "base/check.h"

namespace moerl::http {

namespace {

struct Transfer {
  const HttpRequest* req;
  HttpResponse* resp;
  CURL* curl;
  size_t body_offset = 0;
  bool status_known = false;
  bool to_sink = false;
};

size_t on_read(char* buf, size_t size, size_t nitems, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t max = size * nitems;
  if (t->req->reader) {
    try {
      return t->req->reader(buf, max);
    } catch (...) {
      return CURL_READFUNC_ABORT;
    }
  }
  size_t n = std::min(max, t->req->body.size() - t->body_offset);
  std::copy_n(t->req->body.data() + t->body_offset, n, buf);
  t->body_offset += n;
  return n;
}

size_t on_write(char* data, size_t size, size_t nmemb, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t n = size * nmemb;
  if (!t->status_known) {
    long code = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
    t->status_known = true;
    t->to_sink = t->req->sink && code >= 200 && code < 300;
  }
  if (t->to_sink) {
    bool ok = false;
    try {
      ok = t->req->sink(data, n);
    } catch (...) {
      ok = false;
    }
    if (!ok) {
      t->resp->sink_aborted = true;
      return 0;  // makes curl fail the transfer with CURLE_WRITE_ERROR
    }
    return n;
  }
  t->resp->body.append(data, n);
  return n;
}

size_t on_header(char* data, size_t size, size_t nitems, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t n = size * nitems;
  std::string line(data, n);
  if (line.rfind("HTTP/", 0) == 0) {
    t->resp->headers.clear();  // a new status line (e.g. after 100 Continue)
    return n;
  }
  size_t colon = line.find(':');
  if (colon == std::string::npos) return n;
  std::string name = line.substr(0, colon);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  size_t b = colon + 1;
  while (b < line.size() && (line[b] == ' ' || line[b] == '\t')) ++b;
  size_t e = line.size();
  while (e > b && (line[e - 1] == '\r' || line[e - 1] == '\n' || line[e - 1] == ' ')) --e;
  t->resp->headers[name] = line.substr(b, e - b);
  return n;
}

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

std::string HttpResponse::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? "" : it->second;
}

HttpClient::HttpClient() { global_init(); }

HttpClient::~HttpClient() {
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
}

void* HttpClient::acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      return h;
    }
  }
  CURL* c = curl_easy_init();
  MOERL_CHECK(c != nullptr) << "curl_easy_init failed";
  return c;
}

void HttpClient::release(void* handle) {
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() < 64) {
    idle_.push_back(handle);
  } else {
    curl_easy_cleanup(static_cast<CURL*>(handle));
  }
}

HttpResponse HttpClient::perform(const HttpRequest& req) {
  HttpResponse resp;
  CURL* c = static_cast<CURL*>(acquire());
  // NOTE: curl_easy_reset keeps the handle's live connections and DNS cache.
  curl_easy_reset(c);
  Transfer t{&req, &resp, c};

  curl_easy_setopt(c, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
#if LIBCURL_VERSION_NUM >= 0x075500
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
#else
  curl_easy_setopt(c, CURLOPT_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(req.connect_timeout_s * 1000));
  if (req.timeout_s > 0) curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(req.timeout_s * 1000));
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, std::max(1L, static_cast<long>(req.stall_timeout_s)));
  curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 512L * 1024);
  curl_easy_setopt(c, CURLOPT_UPLOAD_BUFFERSIZE, 1024L * 1024);
  curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);

  bool has_body = req.reader || !req.body.empty() || req.method == "PUT" || req.method == "POST";
  if (req.method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (has_body) {
    uint64_t len = req.reader ? req.reader_size : req.body.size();
    curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(c, CURLOPT_READDATA, &t);
    curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(len));
    if (req.method != "PUT") curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  } else if (req.method != "GET") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  }

  curl_slist* headers = nullptr;
  for (const auto& [k, v] : req.headers) headers = curl_slist_append(headers, (k + ": " + v).c_str());
  // No "Expect: 100-continue" round trip, and no implicit content type.
  headers = curl_slist_append(headers, "Expect:");
  headers = curl_slist_append(headers, "Accept:");
  if (has_body) headers = curl_slist_append(headers, "Transfer-Encoding:");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);

  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  CURLcode rc = curl_easy_perform(c);
  curl_slist_free_all(headers);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  if (rc != CURLE_OK) {
    resp.status = 0;
    resp.transport_error = std::string(curl_easy_strerror(rc)) + (errbuf[0] ? std::string(": ") + errbuf : "");
    // A failed transfer may leave the connection in an unknown state: do not reuse it.
    curl_easy_cleanup(c);
    return resp;
  }
  resp.status = status;
  release(c);
  return resp;
}

}  // namespace moerl::http
