// Test-only fake EC2 instance-metadata endpoint (IMDSv2) on 127.0.0.1: PUT /latest/api/token
// hands out a token, GET /latest/meta-data/spot/instance-action answers 404 until
// set_notice(true), then 200 with a terminate notice; wrong or missing tokens get 401.
// Header-only; one server thread, stopped by the destructor.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

namespace moerl::runtime {

class FakeMetadataServer {
 public:
  FakeMetadataServer() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    listen(fd_, 16);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeMetadataServer() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void set_notice(bool on) { notice_ = on; }
  void revoke_tokens() { ++token_gen_; }  // outstanding tokens now get 401
  int puts() const { return puts_; }
  int gets() const { return gets_; }
  int unauthorized() const { return unauthorized_; }
  std::string last_ttl_header() const { return ttl_seen_ ? "seen" : ""; }

 private:
  static std::string header(const std::string& req, const std::string& name) {
    std::string lower = req;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string key = "\r\n" + name + ":";
    size_t p = lower.find(key);
    if (p == std::string::npos) return "";
    size_t start = req.find_first_not_of(' ', p + key.size());
    size_t end = req.find("\r\n", start);
    return req.substr(start, end - start);
  }
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      std::string req;
      char buf[2048];
      while (req.find("\r\n\r\n") == std::string::npos) {
        pollfd q{c, POLLIN, 0};
        if (poll(&q, 1, 1000) <= 0) break;
        ssize_t n = read(c, buf, sizeof(buf));
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
      }
      std::string status = "404 Not Found", body = "";
      std::string token = "tok-" + std::to_string(token_gen_.load());
      if (req.rfind("PUT /latest/api/token ", 0) == 0) {
        ++puts_;
        if (!header(req, "x-aws-ec2-metadata-token-ttl-seconds").empty()) {
          ttl_seen_ = true;
          status = "200 OK";
          body = token;
        } else {
          status = "400 Bad Request";
        }
      } else if (req.rfind("GET /latest/meta-data/spot/instance-action ", 0) == 0) {
        ++gets_;
        if (header(req, "x-aws-ec2-metadata-token") != token) {
          ++unauthorized_;
          status = "401 Unauthorized";
        } else if (notice_) {
          status = "200 OK";
          body = R"({"action": "terminate", "time": "2026-11-29T08:00:00Z"})";
        }
      }
      std::string resp = "HTTP/1.1 " + status + "\r\nContent-Length: " + std::to_string(body.size()) +
                         "\r\nConnection: close\r\n\r\n" + body;
      ssize_t ignored = write(c, resp.data(), resp.size());
      (void)ignored;
      close(c);
    }
  }

  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> notice_{false};
  std::atomic<int> token_gen_{1};
  std::atomic<int> puts_{0}, gets_{0}, unauthorized_{0};
  std::atomic<bool> ttl_seen_{false};
  std::thread thread_;
};

}  // namespace moerl::runtime
