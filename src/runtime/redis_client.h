// A small synchronous Redis client over hiredis (RESP2): URL parsing, binary-safe argv
// commands, a deadline on every call, and reconnect with exponential backoff when the
// connection drops (Redis restart) or the server is still loading its AOF.
//
//   RedisClient c(parse_redis_url("redis://:secret@127.0.0.1:6390/2"));
//   RedisReply r = c.command({"XADD", "s", "*", "f", bytes}, Deadline::after_seconds(10));
//   if (r.is_error()) ...;                      // server error replies are returned, not thrown
// Thread-safe: one connection guarded by a mutex, one command at a time (so give each thread
// that blocks on XREADGROUP its own client). A call retried after a lost connection may run
// twice on the server (at-least-once); runtime callers are idempotent or dedupe downstream.
// Failure: when the deadline passes without an answer, throws moerl::Error(kUnavailable)
// naming the server, the command and the last connection error. A call that is waiting on a
// live but slow server may overrun its deadline by up to RedisOptions::min_io_timeout_seconds.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "base/deadline.h"

struct redisContext;

namespace moerl::runtime {

struct RedisUrl {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string password;  // empty: no AUTH
  int db = 0;
  std::string to_string() const;  // password masked
};
// "redis://[[user]:password@]host[:port][/db]"; throws moerl::Error naming the URL (password
// redacted) on bad input.
RedisUrl parse_redis_url(const std::string& url);
// A URL fit for logs, errors and summaries: the password of redis://[user]:PASSWORD@host (or
// redis://PASSWORD@host) is replaced by "***"; other URLs are returned unchanged.
std::string redact_url(const std::string& url);
// The URL without its password (and user): what a config written to disk may hold.
std::string strip_url_password(const std::string& url);

struct RedisReply {
  enum class Type { kNil, kString, kStatus, kError, kInteger, kArray };
  Type type = Type::kNil;
  std::string str;  // kString, kStatus, kError
  int64_t integer = 0;
  std::vector<RedisReply> elements;
  bool is_nil() const { return type == Type::kNil; }
  bool is_error() const { return type == Type::kError; }
  bool is_array() const { return type == Type::kArray; }
  const RedisReply& at(size_t i) const;  // CHECKs the index and the array type
  std::string describe() const;          // for error messages
};

struct RedisOptions {
  double connect_timeout_seconds = 2.0;
  double backoff_initial_seconds = 0.02;
  double backoff_max_seconds = 1.0;
  // Floor of the socket timeout: a loaded server (fsync on every write) may answer a call
  // whose deadline is nearly spent a little late; such a call may overrun its deadline by up
  // to this much instead of dropping a reply the server already acted on.
  double min_io_timeout_seconds = 2.0;
};

class RedisClient {
 public:
  explicit RedisClient(RedisUrl url, RedisOptions options = {});
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // Runs one command. `block_seconds` is how long the server may legitimately hold the
  // reply (XREADGROUP BLOCK); the socket timeout allows for it.
  RedisReply command(const std::vector<std::string>& argv, Deadline deadline,
                     double block_seconds = 0);
  // Like command() but a server error reply throws moerl::Error(kIo) naming the command.
  RedisReply command_ok(const std::vector<std::string>& argv, Deadline deadline,
                        double block_seconds = 0);
  const RedisUrl& url() const { return url_; }
  int64_t reconnects() const;

 private:
  bool connect_locked(std::string* error);
  void disconnect_locked();

  const RedisUrl url_;          // immutable after construction
  const RedisOptions options_;  // immutable after construction
  mutable std::mutex mu_;
  redisContext* ctx_ = nullptr;  // guarded by mu_; null while disconnected
  int64_t num_connects_ = 0;     // guarded by mu_
};

}  // namespace moerl::runtime
