// Loopback HTTP test endpoint / fault-injecting proxy, and the S3 test server process.
#include "store/testing/loopback_http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "base/error.h"
#include "base/files.h"

namespace moerl::store::testing {

std::string source_dir() {
  const char* d = std::getenv("MOERL_SOURCE_DIR");
  return d && *d ? d : std::filesystem::current_path().string();
}

Reply Reply::respond(int status, std::string body, std::vector<std::pair<std::string, std::string>> headers) {
  Reply r;
  r.kind = Kind::kRespond;
  r.status = status;
  r.body = std::move(body);
  r.headers = std::move(headers);
  return r;
}

Reply Reply::slow_down() {
  return respond(503, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>",
                 {{"Content-Type", "application/xml"}});
}

Reply Reply::internal_error() {
  return respond(500, "<Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>",
                 {{"Content-Type", "application/xml"}});
}

static bool send_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Reads until fn says the buffer is complete, EOF, or 30 s without data.
static bool recv_more(int fd, std::string& buf) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 30000) <= 0) return false;
  char tmp[1 << 16];
  ssize_t n = ::recv(fd, tmp, sizeof(tmp), 0);
  if (n <= 0) return false;
  buf.append(tmp, static_cast<size_t>(n));
  return true;
}

LoopbackHttp::LoopbackHttp(Handler handler, int upstream_port, bool decide_after_body)
    : handler_(std::move(handler)), upstream_port_(upstream_port), decide_after_body_(decide_after_body) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(listen_fd_, 128) != 0) {
    throw std::runtime_error("LoopbackHttp: bind/listen on 127.0.0.1 failed");
  }
  socklen_t len = sizeof(a);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

LoopbackHttp::~LoopbackHttp() {
  stop_ = true;
  acceptor_.join();
  ::close(listen_fd_);
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    workers.swap(workers_);
  }
  for (auto& t : workers) t.join();
}

std::vector<HttpExchange> LoopbackHttp::log() const {
  std::lock_guard<std::mutex> lock(mu_);
  return log_;
}

void LoopbackHttp::accept_loop() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard<std::mutex> lock(mu_);
    workers_.emplace_back([this, fd] {
      serve(fd);
      ::close(fd);
    });
  }
}

static int connect_loopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void LoopbackHttp::serve(int fd) {
  std::string buf;
  size_t head_end;
  while ((head_end = buf.find("\r\n\r\n")) == std::string::npos) {
    if (!recv_more(fd, buf)) return;
  }
  HttpExchange ex;
  std::string head = buf.substr(0, head_end);
  size_t line_end = head.find("\r\n");
  std::string request_line = head.substr(0, line_end);
  size_t sp1 = request_line.find(' '), sp2 = request_line.rfind(' ');
  ex.method = request_line.substr(0, sp1);
  ex.target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string forwarded_head = request_line + "\r\n";
  size_t pos = line_end + 2;
  while (pos < head.size()) {
    size_t e = head.find("\r\n", pos);
    if (e == std::string::npos) e = head.size();
    std::string line = head.substr(pos, e - pos);
    pos = e + 2;
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    ex.headers[name] = value;
    if (name != "connection") forwarded_head += line + "\r\n";
  }
  forwarded_head += "Connection: close\r\n\r\n";
  size_t content_length = ex.headers.count("content-length") ? std::stoull(ex.headers["content-length"]) : 0;
  size_t have = buf.size() - head_end - 4;

  ex.index = next_index_++;
  int now = ++in_flight_;
  for (int m = max_in_flight_.load(); now > m && !max_in_flight_.compare_exchange_weak(m, now);) {
  }
  struct Leave {
    std::atomic<int>& n;
    ~Leave() { --n; }
  } leave{in_flight_};

  if (decide_after_body_) {
    while (have < content_length) {
      if (!recv_more(fd, buf)) return;
      have = buf.size() - head_end - 4;
    }
    ex.body = buf.substr(head_end + 4, content_length);
  }
  // Otherwise decide on the headers alone, so a mid-request close really happens mid-body.
  Reply reply = handler_(ex);
  if (reply.kind == Reply::Kind::kCloseMidRequest) {
    while (have < content_length / 2 && recv_more(fd, buf)) have = buf.size() - head_end - 4;
    {
      std::lock_guard<std::mutex> lock(mu_);
      log_.push_back(ex);
    }
    ::shutdown(fd, SHUT_RDWR);
    return;
  }
  if (reply.kind == Reply::Kind::kForwardHalfThenCut) {
    while (have < content_length / 2 && recv_more(fd, buf)) have = buf.size() - head_end - 4;
    {
      std::lock_guard<std::mutex> lock(mu_);
      log_.push_back(ex);
    }
    int up = upstream_port_ == 0 ? -1 : connect_loopback(upstream_port_);
    if (up >= 0) {
      std::string part = forwarded_head + buf.substr(head_end + 4, content_length / 2);
      if (send_all(up, part.data(), part.size())) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      ::close(up);
    }
    ::shutdown(fd, SHUT_RDWR);
    return;
  }
  while (have < content_length) {
    if (!recv_more(fd, buf)) return;
    have = buf.size() - head_end - 4;
  }
  ex.body = buf.substr(head_end + 4, content_length);
  {
    std::lock_guard<std::mutex> lock(mu_);
    log_.push_back(HttpExchange{ex.index, ex.method, ex.target, ex.headers, ""});
  }

  if (reply.kind == Reply::Kind::kRespond) {
    std::string out = "HTTP/1.1 " + std::to_string(reply.status) + " X\r\nContent-Length: " +
                      std::to_string(reply.body.size()) + "\r\nConnection: close\r\n";
    for (const auto& [k, v] : reply.headers) out += k + ": " + v + "\r\n";
    out += "\r\n" + reply.body;
    send_all(fd, out.data(), out.size());
    return;
  }
  if (upstream_port_ == 0) return;
  int up = connect_loopback(upstream_port_);
  if (up < 0) return;
  std::string req = forwarded_head + ex.body;
  if (!send_all(up, req.data(), req.size())) {
    ::close(up);
    return;
  }
  std::string resp;
  while (recv_more(up, resp)) {
  }
  ::close(up);
  if (reply.kind == Reply::Kind::kForwardThenDrop) {
    ::shutdown(fd, SHUT_RDWR);
    return;
  }
  size_t n = resp.size();
  if (reply.kind == Reply::Kind::kForwardTruncated) {
    size_t body_at = resp.find("\r\n\r\n");
    n = body_at == std::string::npos ? n / 2 : body_at + 4 + (n - body_at - 4) / 2;
  }
  send_all(fd, resp.data(), n);
}

S3TestServer::S3TestServer() {
  std::string script = source_dir() + "/tools/s3/server.js";
  std::string modules = source_dir() + "/tools/s3/node_modules/@20minutes/s3rver";
  if (!std::filesystem::exists(modules)) {
    throw std::runtime_error("S3 test server not installed (" + modules +
                             " missing)\nHINT: run scripts/install-deps.sh (npm ci in tools/s3)");
  }
  char tmpl[] = "/tmp/moerl-s3rver-XXXXXX";
  dir_ = ::mkdtemp(tmpl);
  int in_pipe[2], out_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0 || ::pipe2(out_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  process_ = Subprocess::spawn({"node", "--openssl-legacy-provider", script, "--port", "0", "--dir", dir_, "--bucket", kBucket},
                              {.stdin_from = Redirect::to_fd(in_pipe[0]), .stdout_to = Redirect::to_fd(out_pipe[1])});
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  stdin_fd_ = in_pipe[1];
  // Wait for "S3_TEST_SERVER_PORT=N", at most 20 s.
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (out.find('\n') == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    pollfd p{out_pipe[0], POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    char b[256];
    ssize_t n = ::read(out_pipe[0], b, sizeof(b));
    if (n <= 0) break;
    out.append(b, static_cast<size_t>(n));
  }
  ::close(out_pipe[0]);
  size_t at = out.find("S3_TEST_SERVER_PORT=");
  if (at == std::string::npos) {
    stop();
    throw std::runtime_error("S3 test server (node " + script + ") did not report its port within 20 s; output: '" +
                             out + "'\nHINT: check `node --version` (>= 20) and scripts/install-deps.sh");
  }
  port_ = std::atoi(out.c_str() + at + 20);
}

S3TestServer::~S3TestServer() { stop(); }

void S3TestServer::stop() {
  if (process_.pid() > 0) {
    ::close(stdin_fd_);  // the server exits when its stdin closes
    process_.stop(5.0);
    process_ = Subprocess();
  }
  if (!dir_.empty()) {
    try {
      remove_tree(dir_);
    } catch (const Error&) {
    }
    dir_.clear();
  }
}

}  // namespace moerl::store::testing
