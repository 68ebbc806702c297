// Test-only HTTP endpoints on 127.0.0.1: LoopbackHttp answers each request through a
// handler that may forward it to an upstream server (a fault-injecting proxy in front of the
// S3 test server), answer it itself (canned 503 SlowDown, STS / IMDS / container credential
// responses), or misbehave on the wire (close mid-request, forward then drop the response,
// truncate the response, forward half a body and cut). One request per connection (it answers "Connection: close").
// S3TestServer starts tools/s3/server.js (s3rver) on an ephemeral port and stops it.
//
//   S3TestServer s3;                                       // waits for the port (deadline)
//   LoopbackHttp proxy([](const HttpExchange& r) { return r.index < 2 ? Reply::slow_down() : Reply::forward(); },
//                      s3.port());
// Thread-safe: the handler runs on the connection threads, concurrently.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/subprocess.h"

namespace moerl::store::testing {

struct HttpExchange {
  int64_t index = 0;  // order of arrival, from 0
  std::string method;
  std::string target;  // path + query as sent
  std::map<std::string, std::string> headers;  // lowercase names
  std::string body;
  bool has(const std::string& query_word) const { return target.find(query_word) != std::string::npos; }
};

struct Reply {
  enum class Kind { kForward, kRespond, kCloseMidRequest, kForwardThenDrop, kForwardTruncated, kForwardHalfThenCut };
  Kind kind = Kind::kForward;
  int status = 200;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;

  static Reply forward() { return {}; }
  static Reply respond(int status, std::string body, std::vector<std::pair<std::string, std::string>> headers = {});
  static Reply slow_down();       // 503 <Error><Code>SlowDown</Code>...
  static Reply internal_error();  // 500 InternalError
  static Reply close_mid_request() { return of(Kind::kCloseMidRequest); }
  static Reply forward_then_drop() { return of(Kind::kForwardThenDrop); }
  static Reply forward_truncated() { return of(Kind::kForwardTruncated); }
  // Forwards the head and half the body upstream, then closes both ends: a client that
  // died mid-upload, as the server sees it.
  static Reply forward_half_then_cut() { return of(Kind::kForwardHalfThenCut); }

 private:
  static Reply of(Kind kind) {
    Reply r;
    r.kind = kind;
    return r;
  }
};

class LoopbackHttp {
 public:
  using Handler = std::function<Reply(const HttpExchange&)>;
  // upstream_port 0: the handler must answer everything itself. The handler sees the body
  // only with decide_after_body (then close_mid_request closes after the whole body).
  explicit LoopbackHttp(Handler handler, int upstream_port = 0, bool decide_after_body = false);
  ~LoopbackHttp();
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int64_t requests() const { return next_index_.load(); }
  int max_in_flight() const { return max_in_flight_.load(); }
  std::vector<HttpExchange> log() const;  // every request seen (bodies dropped)

 private:
  void accept_loop();
  void serve(int fd);

  Handler handler_;
  int upstream_port_;
  bool decide_after_body_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> next_index_{0};
  std::atomic<int> in_flight_{0};
  std::atomic<int> max_in_flight_{0};
  std::thread acceptor_;
  mutable std::mutex mu_;
  std::vector<std::thread> workers_;  // guarded by mu_
  std::vector<HttpExchange> log_;     // guarded by mu_
};

// The S3 test server (tools/s3/server.js) as a child process. Bucket "moerl-test" exists;
// credentials are S3RVER / S3RVER. Fails the test (throws) when node or the npm install is
// missing, with a hint to run scripts/install-deps.sh.
class S3TestServer {
 public:
  S3TestServer();
  ~S3TestServer();
  int port() const { return port_; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  static constexpr const char* kBucket = "moerl-test";
  static constexpr const char* kKey = "S3RVER";

 private:
  void stop();

  Subprocess process_;  // node; empty once stopped
  int stdin_fd_ = -1;
  int port_ = 0;
  std::string dir_;
};

std::string source_dir();  // MOERL_SOURCE_DIR, or the current directory

}  // namespace moerl::store::testing
