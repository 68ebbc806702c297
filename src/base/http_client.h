// A small blocking HTTP/1.1 client over libcurl, for every part that talks HTTP (the S3 client
// and its credential providers in store/, the remote reward service in tasks/). One perform()
// is one attempt: no retries here (each caller owns its retry policy).
// Transport failures (refused, reset, timeout, stall) come back as a response with status 0
// and `transport_error` set, never as exceptions, so callers can classify them.
// Request bodies come from memory or from a reader callback (streaming from a file);
// response bodies go to memory, or to a sink callback when the status is 2xx (streaming to a
// file). Connections are reused through a pool of curl handles.
//
//   HttpClient http;
//   HttpResponse r = http.perform({.method = "GET", .url = "http://127.0.0.1:9000/b/k"});
// Thread-safe: perform() may be called from many threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moerl::http {

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string_view body;                                 // in-memory body (used when no reader)
  std::function<size_t(char* buf, size_t max)> reader;   // streaming body; returns bytes, 0 at end
  uint64_t reader_size = 0;                              // exact length of the streamed body
  std::function<bool(const char* data, size_t n)> sink;  // 2xx body; return false to abort
  double timeout_s = 0;                                  // 0 = none (bounded by stall detection)
  double connect_timeout_s = 10;
  double stall_timeout_s = 60;                           // < 1 KiB/s for this long aborts
};

struct HttpResponse {
  long status = 0;                                // 0 when the transport failed
  std::map<std::string, std::string> headers;     // lowercase names
  std::string body;                               // non-2xx bodies, and 2xx without a sink
  std::string transport_error;                    // curl's message when status == 0
  bool sink_aborted = false;                      // the sink returned false
  std::string header(const std::string& lower_name) const;
};

class HttpClient {
 public:
  HttpClient();
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  HttpResponse perform(const HttpRequest& req);

 private:
  void* acquire();
  void release(void* handle);

  std::mutex mu_;
  std::vector<void*> idle_;  // CURL* handles with warm connections; guarded by mu_
};

}  // namespace moerl::http
