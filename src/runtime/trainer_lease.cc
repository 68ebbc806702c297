// TrainerLease over Redis: a key with a TTL that names the holder, taken with an epoch from
// a counter, renewed by a thread, released on a clean exit.
#include "runtime/trainer_lease.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "base/log.h"
#include "runtime/redis_queue.h"
#include "runtime/runtime_config.h"

namespace moerl::runtime {
namespace {

// KEYS[1] lease, KEYS[2] epoch counter; ARGV[1] holder, ARGV[2] ttl ms.
// {1, value, epoch} taken; {0, current value, remaining ms} held by someone else.
constexpr const char* kAcquireScript = R"lua(
local cur = redis.call('GET', KEYS[1])
if cur then return {0, cur, redis.call('PTTL', KEYS[1])} end
local e = redis.call('INCR', KEYS[2])
local v = e .. ' ' .. ARGV[1]
redis.call('SET', KEYS[1], v, 'PX', ARGV[2])
return {1, v, e}
)lua";

// KEYS[1] lease, KEYS[2] epoch counter; ARGV[1] our value, ARGV[2] ttl ms, ARGV[3] our epoch.
// {1, value} still ours (extended; re-taken when it expired and no one claimed a later epoch,
// e.g. across a Redis restart, also one from an AOF that lost our claim: the counter is put
// back); {0, holder or ""} lost.
constexpr const char* kRenewScript = R"lua(
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, cur}
end
if not cur and tonumber(redis.call('GET', KEYS[2]) or '0') <= tonumber(ARGV[3]) then
  redis.call('SET', KEYS[2], ARGV[3])
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1, ARGV[1]}
end
return {0, cur or ''}
)lua";

// KEYS[1] lease; ARGV[1] our value. Deletes it only if it is ours.
constexpr const char* kReleaseScript = R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
)lua";

std::string ms(double seconds) { return std::to_string(std::max<int64_t>(1, static_cast<int64_t>(seconds * 1000))); }

}  // namespace

RedisTrainerLease::RedisTrainerLease(const RedisUrl& url, const std::string& ns, std::string holder,
                                     double ttl_seconds, RedisOptions redis)
    : ns_(ns),
      lease_key_(RedisKeys(ns).trainer_lease),
      epoch_key_(RedisKeys(ns).trainer_epoch),
      holder_(std::move(holder)),
      ttl_seconds_(ttl_seconds),
      client_(url, redis),
      renewer_(url, redis) {
  if (!(ttl_seconds > 0)) {
    throw Error("trainer lease: runtime.trainer_lease_seconds=" + std::to_string(ttl_seconds) + " is not positive",
                "use a few seconds more than the longest pause a trainer may have (default 15)");
  }
}

RedisTrainerLease::~RedisTrainerLease() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (value_.empty() || lost_) return;
  try {
    client_.command({"EVAL", kReleaseScript, "1", lease_key_, value_}, Deadline::after_seconds(2));
  } catch (const std::exception& e) {
    MOERL_LOG(WARN) << "trainer lease: could not release " << lease_key_ << " (" << e.what()
                    << "); it expires in " << ttl_seconds_ << " s";
  }
}

uint64_t RedisTrainerLease::acquire(Deadline deadline) {
  double next_note = 0;
  while (true) {
    RedisReply r = client_.command_ok({"EVAL", kAcquireScript, "2", lease_key_, epoch_key_, holder_, ms(ttl_seconds_)},
                                      deadline);
    if (r.at(0).integer == 1) {
      value_ = r.at(1).str;
      epoch_ = static_cast<uint64_t>(r.at(2).integer);
      renewed_at_ = now_seconds();
      break;
    }
    const std::string held_by = r.at(1).str;
    const double left = static_cast<double>(r.at(2).integer) / 1000;
    if (deadline.expired()) {
      throw Error("trainer: runtime.namespace '" + ns_ + "' is held by another live trainer ('" + held_by +
                      "', lease renewed within the last " + std::to_string(static_cast<int>(ttl_seconds_)) + " s)",
                  "two trainers must not share a namespace: stop the other one (kubectl get pods), or give this "
                  "run its own runtime.namespace",
                  ErrorCode::kInvalidInput);
    }
    if (now_seconds() >= next_note) {
      MOERL_LOG(WARN) << "trainer: runtime.namespace '" << ns_ << "' is held by '" << held_by << "' (lease expires in "
                      << left << " s unless renewed); waiting for it (a trainer that died keeps its lease until "
                      << "then)";
      next_note = now_seconds() + 5;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(
        std::clamp(std::min(left, deadline.remaining_seconds()) * 1000 + 20, 20.0, 500.0))));
  }
  MOERL_LOG(INFO) << "trainer: holds runtime.namespace '" << ns_ << "' as epoch " << epoch_ << " (lease "
                  << ttl_seconds_ << " s)";
  thread_ = std::thread([this] { renew_loop(); });
  return epoch_;
}

bool RedisTrainerLease::renew(RedisClient& client, Deadline deadline) {
  RedisReply r = client.command_ok(
      {"EVAL", kRenewScript, "2", lease_key_, epoch_key_, value_, ms(ttl_seconds_), std::to_string(epoch_)}, deadline);
  if (r.at(0).integer == 1) {
    renewed_at_ = now_seconds();
    return true;
  }
  if (!lost_.exchange(true)) MOERL_LOG(ERROR) << lost_message(r.at(1).str);
  return false;
}

void RedisTrainerLease::renew_loop() {
  const auto period = std::chrono::milliseconds(static_cast<int64_t>(ttl_seconds_ * 1000 / 3));
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_ && !lost_) {
    if (cv_.wait_for(lock, period, [this] { return stop_; })) break;
    lock.unlock();
    try {
      renew(renewer_, Deadline::after_seconds(ttl_seconds_ / 3));
    } catch (const Error& e) {
      // Redis unreachable: keep trying; the lease is re-taken on return if no one claimed it.
      MOERL_LOG(WARN) << "trainer lease: renewal failed (" << e.what() << "); retrying";
    }
    lock.lock();
  }
}

void RedisTrainerLease::check(Deadline deadline) {
  if (value_.empty()) {
    throw Error("trainer lease: check() before acquire()", "a bug in moerl", ErrorCode::kInternal);
  }
  bool ours = !lost_;
  try {
    if (ours) ours = renew(client_, deadline);
  } catch (const Error& e) {
    // Redis unreachable: the lease is still ours as far as anyone can know until it expires.
    if (e.code() != ErrorCode::kUnavailable || now_seconds() - renewed_at_ >= ttl_seconds_) throw;
  }
  if (!ours) {
    throw Error(lost_message(""), "two trainers must not share a runtime.namespace; a trainer paused past "
                                  "runtime.trainer_lease_seconds is replaced by its successor",
                ErrorCode::kInvalidInput);
  }
}

std::string RedisTrainerLease::lost_message(const std::string& holder) const {
  return "trainer: lost runtime.namespace '" + ns_ + "' (epoch " + std::to_string(epoch_) + ")" +
         (holder.empty() ? std::string(" to another trainer") : " to '" + holder + "'") +
         "; this trainer stops without publishing or checkpointing again";
}

const char* const kEpochFencePrologue = R"lua(
if ARGV[#ARGV] ~= '0' then
  local now = redis.call('GET', KEYS[#KEYS]) or '0'
  if tonumber(now) > tonumber(ARGV[#ARGV]) then return {'fenced', now} end
end
)lua";

void throw_if_fenced(const RedisReply& reply, const std::string& ns, const std::string& epoch,
                     const std::string& what) {
  if (!reply.is_array() || reply.elements.size() != 2 || reply.at(0).str != "fenced") return;
  throw Error("trainer: lost runtime.namespace '" + ns + "' (epoch " + epoch + ") to a later trainer (epoch " +
                  reply.at(1).str + "); " + what,
              "two trainers must not share a runtime.namespace; a trainer paused past "
              "runtime.trainer_lease_seconds is replaced by its successor, which writes the namespace now");
}

std::unique_ptr<TrainerLease> open_trainer_lease(const RuntimeConfig& config, const std::string& holder) {
  if (config.backend() == BackendKind::kInProcess) return nullptr;
  return std::make_unique<RedisTrainerLease>(config.redis_url(), config.ns, holder,
                                             config.trainer_lease_seconds);
}

}  // namespace moerl::runtime
