// RedisClient: hiredis synchronous API with per-call socket timeouts derived from the
// deadline; on I/O errors the context is dropped and rebuilt with exponential backoff.
#include "runtime/redis_client.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <algorithm>
#include <random>
#include <thread>

#include "base/check.h"
#include "base/error.h"
#include "base/log.h"

namespace moerl::runtime {
namespace {

timeval to_timeval(double seconds) {
  seconds = std::max(seconds, 0.001);
  timeval tv;
  tv.tv_sec = static_cast<time_t>(seconds);
  tv.tv_usec = static_cast<suseconds_t>((seconds - static_cast<double>(tv.tv_sec)) * 1e6);
  return tv;
}

RedisReply convert(const redisReply* r) {
  RedisReply out;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::kString;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::kStatus;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = RedisReply::Type::kError;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      out.elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(convert(r->element[i]));
      break;
    default:
      out.type = RedisReply::Type::kNil;
  }
  return out;
}

// Errors that mean "the server is up but not ready yet": retry like a lost connection.
bool is_out_of_memory(const std::string& msg) { return msg.rfind("OOM ", 0) == 0; }

// Replies that say "not now": retried with backoff until the deadline like a lost connection.
// OOM (maxmemory reached under noeviction) is one: a full Redis pushes back on writers until
// the trainer's trim frees memory, instead of failing them.
bool is_transient_error(const std::string& msg) {
  return msg.rfind("LOADING", 0) == 0 || msg.rfind("BUSY ", 0) == 0 || msg.rfind("TRYAGAIN", 0) == 0 ||
         msg.rfind("MASTERDOWN", 0) == 0 || is_out_of_memory(msg);
}

std::string command_name(const std::vector<std::string>& argv) {
  return argv.empty() ? std::string("(empty)") : argv[0];
}

// Where the user:password part of a "scheme://" URL starts and ends ('@'); false when it has
// none. The host part never holds '@', so a password may (the last '@' ends it).
bool auth_span(const std::string& url, size_t* start, size_t* at) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return false;
  *start = scheme + 3;
  *at = url.rfind('@');
  return *at != std::string::npos && *at >= *start;
}

}  // namespace

std::string RedisUrl::to_string() const {
  return "redis://" + std::string(password.empty() ? "" : ":***@") + host + ":" +
         std::to_string(port) + "/" + std::to_string(db);
}

std::string redact_url(const std::string& url) {
  size_t start = 0, at = 0;
  if (!auth_span(url, &start, &at)) return url;
  const size_t colon = url.find(':', start);
  // "user:password@" keeps the user; "password@" (no colon) is all password.
  const size_t pw = colon != std::string::npos && colon < at ? colon + 1 : start;
  return url.substr(0, pw) + "***" + url.substr(at);
}

std::string strip_url_password(const std::string& url) {
  size_t start = 0, at = 0;
  return auth_span(url, &start, &at) ? url.substr(0, start) + url.substr(at + 1) : url;
}

RedisUrl parse_redis_url(const std::string& url) {
  auto bad = [&](const std::string& why) -> Error {
    return Error("redis URL '" + redact_url(url) + "': " + why,
                 "use redis://[:password@]host[:port][/db], e.g. redis://127.0.0.1:6379/0 (the password "
                 "better in runtime.queue_password_file or MOERL_REDIS_PASSWORD)");
  };
  const std::string kScheme = "redis://";
  if (url.rfind(kScheme, 0) != 0) throw bad("must start with redis://");
  std::string rest = url.substr(kScheme.size());
  RedisUrl u;
  size_t at = rest.rfind('@');
  if (at != std::string::npos) {
    std::string auth = rest.substr(0, at);
    rest = rest.substr(at + 1);
    // NOTE: "user:pass@" (Redis 6 ACL user) is accepted; only the password is used.
    size_t colon = auth.find(':');
    u.password = colon == std::string::npos ? auth : auth.substr(colon + 1);
    if (u.password.empty()) throw bad("empty password before '@'");
  }
  size_t slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  if (slash != std::string::npos) {
    std::string db = rest.substr(slash + 1);
    if (!db.empty()) {
      if (db.find_first_not_of("0123456789") != std::string::npos || db.size() > 5) {
        throw bad("database '" + db + "' is not a small whole number");
      }
      u.db = std::stoi(db);
    }
  }
  size_t colon = hostport.rfind(':');
  if (colon != std::string::npos) {
    std::string port = hostport.substr(colon + 1);
    if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos ||
        port.size() > 5 || std::stoi(port) < 1 || std::stoi(port) > 65535) {
      throw bad("port '" + port + "' is not in 1..65535");
    }
    u.port = std::stoi(port);
    hostport = hostport.substr(0, colon);
  }
  if (hostport.empty()) throw bad("missing host");
  u.host = hostport;
  return u;
}

const RedisReply& RedisReply::at(size_t i) const {
  MOERL_CHECK(type == Type::kArray && i < elements.size())
      << "redis reply " << describe() << " has no element " << i;
  return elements[i];
}

std::string RedisReply::describe() const {
  switch (type) {
    case Type::kNil: return "nil";
    case Type::kString: return "\"" + str.substr(0, 60) + (str.size() > 60 ? "...\"" : "\"");
    case Type::kStatus: return str;
    case Type::kError: return "ERR(" + str + ")";
    case Type::kInteger: return std::to_string(integer);
    case Type::kArray: return "array[" + std::to_string(elements.size()) + "]";
  }
  return "?";
}

RedisClient::RedisClient(RedisUrl url, RedisOptions options)
    : url_(std::move(url)), options_(options) {}

RedisClient::~RedisClient() {
  std::lock_guard<std::mutex> lock(mu_);
  disconnect_locked();
}

int64_t RedisClient::reconnects() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::max<int64_t>(0, num_connects_ - 1);
}

void RedisClient::disconnect_locked() {
  if (ctx_ != nullptr) redisFree(ctx_);
  ctx_ = nullptr;
}

bool RedisClient::connect_locked(std::string* error) {
  disconnect_locked();
  ctx_ = redisConnectWithTimeout(url_.host.c_str(), url_.port,
                                 to_timeval(options_.connect_timeout_seconds));
  if (ctx_ == nullptr || ctx_->err) {
    *error = ctx_ ? ctx_->errstr : "out of memory";
    disconnect_locked();
    return false;
  }
  redisSetTimeout(ctx_, to_timeval(options_.connect_timeout_seconds));
  auto simple = [&](std::vector<std::string> argv) {
    std::vector<const char*> ptrs;
    std::vector<size_t> lens;
    for (auto& a : argv) {
      ptrs.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(ctx_, static_cast<int>(argv.size()), ptrs.data(), lens.data()));
    if (r == nullptr) {
      *error = ctx_->errstr;
      return false;
    }
    bool ok = r->type != REDIS_REPLY_ERROR;
    if (!ok) *error = std::string(argv[0]) + ": " + std::string(r->str, r->len);
    freeReplyObject(r);
    return ok;
  };
  if (!url_.password.empty() && !simple({"AUTH", url_.password})) {
    disconnect_locked();
    return false;
  }
  if (url_.db != 0 && !simple({"SELECT", std::to_string(url_.db)})) {
    disconnect_locked();
    return false;
  }
  ++num_connects_;
  return true;
}

RedisReply RedisClient::command(const std::vector<std::string>& argv, Deadline deadline,
                                double block_seconds) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (const std::string& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  thread_local std::mt19937 rng(std::random_device{}());
  std::lock_guard<std::mutex> lock(mu_);
  double backoff = options_.backoff_initial_seconds;
  std::string last_error;
  int attempts = 0;
  double t0 = now_seconds();
  while (true) {
    ++attempts;
    if (ctx_ != nullptr || connect_locked(&last_error)) {
      // Socket timeout: what is left of the deadline (at least the I/O floor), plus the time
      // the server may hold a blocking command.
      double remaining =
          std::clamp(deadline.remaining_seconds(), options_.min_io_timeout_seconds, 3600.0);
      redisSetTimeout(ctx_, to_timeval(remaining + block_seconds));
      auto* r = static_cast<redisReply*>(
          redisCommandArgv(ctx_, static_cast<int>(argv.size()), ptrs.data(), lens.data()));
      if (r != nullptr) {
        RedisReply out = convert(r);
        freeReplyObject(r);
        if (!(out.is_error() && is_transient_error(out.str))) return out;
        last_error = out.str;
      } else {
        last_error = ctx_->errstr[0] ? ctx_->errstr : "connection lost";
        disconnect_locked();
        MOERL_LOG(DEBUG) << "redis " << url_.to_string() << ": " << last_error << " during "
                         << command_name(argv) << "; reconnecting";
      }
    }
    if (deadline.remaining_seconds() <= 0) break;
    // Exponential backoff with jitter, never sleeping past the deadline.
    std::uniform_real_distribution<double> jitter(0.5, 1.0);
    double sleep_s = std::min(backoff * jitter(rng), deadline.remaining_seconds());
    std::this_thread::sleep_for(std::chrono::duration<double>(std::max(sleep_s, 0.0)));
    backoff = std::min(backoff * 2, options_.backoff_max_seconds);
    if (deadline.remaining_seconds() <= 0) break;
  }
  if (is_out_of_memory(last_error)) {
    throw Error("redis " + url_.to_string() + ": " + command_name(argv) + " refused for " +
                    std::to_string(now_seconds() - t0).substr(0, 6) + " s: the server is at its maxmemory (" +
                    last_error + ")",
                "the experience stream is trimmed behind committed checkpoints: set train.checkpoint_every so the "
                "trainer checkpoints (and trims) often enough, or give Redis more memory ([redis] memory_gib)",
                ErrorCode::kUnavailable);
  }
  throw Error("redis " + url_.to_string() + ": " + command_name(argv) + " got no answer in " +
                  std::to_string(now_seconds() - t0).substr(0, 6) + " s (" +
                  std::to_string(attempts) + " attempts; last error: " + last_error + ")",
              "is redis-server running and reachable at that address? check runtime.queue_url",
              ErrorCode::kUnavailable);
}

RedisReply RedisClient::command_ok(const std::vector<std::string>& argv, Deadline deadline,
                                   double block_seconds) {
  RedisReply r = command(argv, deadline, block_seconds);
  if (r.is_error()) {
    throw Error("redis " + url_.to_string() + ": " + command_name(argv) + " failed: " + r.str,
                "check the Redis server version (7.0+ needed for XAUTOCLAIM) and its log",
                ErrorCode::kIo);
  }
  return r;
}

}  // namespace moerl::runtime
