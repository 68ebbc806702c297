// RedisServer: redis-server as a base/subprocess child with loopback-only, AOF-always
// settings, and a PING wait (which also waits out AOF loading after a restart).
#include "runtime/redis_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/subprocess.h"
#include "runtime/redis_client.h"

namespace moerl::runtime {

int pick_free_loopback_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error(std::string("socket(): ") + std::strerror(errno), "", ErrorCode::kIo);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int e = errno;
    close(fd);
    throw Error(std::string("binding a loopback port: ") + std::strerror(e),
                "is the loopback interface up?", ErrorCode::kIo);
  }
  int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

RedisServer RedisServer::start(const std::string& dir, Deadline deadline, int port,
                               const std::string& password) {
  std::filesystem::create_directories(dir);
  RedisServer s(dir, port > 0 ? port : pick_free_loopback_port(), password);
  s.spawn(deadline);
  return s;
}

RedisServer::~RedisServer() {
  try {
    stop();
  } catch (...) {
  }
}

std::string RedisServer::url(int db) const {
  return "redis://" + std::string(password_.empty() ? "" : ":" + password_ + "@") +
         "127.0.0.1:" + std::to_string(port_) + "/" + std::to_string(db);
}

void RedisServer::spawn(Deadline deadline) {
  std::vector<std::string> args = {"redis-server", "--bind", "127.0.0.1", "--port",
                                   std::to_string(port_), "--dir", dir_, "--appendonly", "yes",
                                   "--appendfsync", "always", "--save", "", "--daemonize", "no",
                                   "--protected-mode", "no", "--logfile", dir_ + "/redis.log"};
  if (!password_.empty()) {
    args.push_back("--requirepass");
    args.push_back(password_);
  }
  SpawnOptions o;
  o.stdin_from = Redirect::dev_null();
  o.stdout_to = Redirect::dev_null();
  // NOTE: a new process group, so a test's SIGTERM to its own group cannot reach Redis.
  o.group = ProcessGroup::kNew;
  // NOTE: redis-server must not outlive a crashed launcher (test or `moerl train`). The
  // signal follows the forking thread, so start servers from a long-lived thread.
  o.parent_death_signal = SIGTERM;
  process_ = Subprocess::spawn(args, o);
  RedisOptions fast;
  fast.connect_timeout_seconds = 0.5;
  fast.backoff_max_seconds = 0.1;
  fast.min_io_timeout_seconds = 0.5;
  RedisClient probe(parse_redis_url(url()), fast);
  while (true) {
    if (std::optional<int> status = process_.poll()) {
      process_ = Subprocess();
      throw Error("redis-server on 127.0.0.1:" + std::to_string(port_) + " exited at start (status " +
                      std::to_string(*status) + "); see " + dir_ + "/redis.log",
                  "install it (scripts/install-deps.sh installs redis-server) or pick another port",
                  ErrorCode::kUnavailable);
    }
    try {
      RedisReply r = probe.command({"PING"}, Deadline::after_seconds(0.2));
      if (r.type == RedisReply::Type::kStatus && r.str == "PONG") return;
    } catch (const Error&) {
    }
    if (deadline.expired()) {
      kill9();
      throw Error("redis-server on 127.0.0.1:" + std::to_string(port_) +
                      " did not answer PING before the deadline; see " + dir_ + "/redis.log",
                  "the machine may be overloaded; allow a longer start deadline",
                  ErrorCode::kTimeout);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void RedisServer::kill9() {
  if (process_.pid() <= 0) return;
  process_.kill();
  process_ = Subprocess();
}

void RedisServer::stop() {
  if (process_.pid() <= 0) return;
  process_.stop(5.0);
  process_ = Subprocess();
}

void RedisServer::restart(Deadline deadline) {
  kill9();
  spawn(deadline);
}

}  // namespace moerl::runtime
