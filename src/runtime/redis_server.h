// Test support (library moerl_runtime_testing, linked by test binaries only; no shipped
// command starts Redis): starts and stops a local redis-server on 127.0.0.1, AOF on with
// `appendfsync always`, data in a directory the caller owns, log in <dir>/redis.log.
//
//   RedisServer server = RedisServer::start("/tmp/job/redis", Deadline::after_seconds(10));
//   std::string url = server.url();             // "redis://127.0.0.1:<port>/0"
//   server.kill9();                             // crash it ...
//   server.restart(Deadline::after_seconds(10));  // ... and bring it back on the same port/dir
// Not thread-safe (one owner). The destructor stops the server (SIGTERM, then SIGKILL); if
// the launching thread dies first, the server gets SIGTERM (PR_SET_PDEATHSIG).
// Failure: redis-server missing or not answering PING by the deadline -> moerl::Error.
#pragma once

#include <sys/types.h>

#include <string>

#include "base/deadline.h"
#include "base/subprocess.h"

namespace moerl::runtime {

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read it back).
int pick_free_loopback_port();

class RedisServer {
 public:
  static RedisServer start(const std::string& dir, Deadline deadline, int port = 0,
                           const std::string& password = "");
  RedisServer(RedisServer&& other) noexcept = default;
  RedisServer& operator=(RedisServer&&) = delete;
  ~RedisServer();

  std::string url(int db = 0) const;
  int port() const { return port_; }
  pid_t pid() const { return process_.pid(); }
  bool running() const { return process_.pid() > 0; }  // started and not stopped by us
  void kill9();                       // SIGKILL + reap: a crash, AOF keeps what was fsynced
  void stop();                        // SIGTERM + reap (SIGKILL after 5 s)
  void restart(Deadline deadline);    // same port, dir and password

 private:
  RedisServer(std::string dir, int port, std::string password)
      : dir_(std::move(dir)), port_(port), password_(std::move(password)) {}
  void spawn(Deadline deadline);

  std::string dir_;
  int port_ = 0;
  std::string password_;
  Subprocess process_;  // empty before start and after kill9/stop
};

}  // namespace moerl::runtime
