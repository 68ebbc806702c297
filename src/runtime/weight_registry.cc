// Weight-version registry backends. Redis keeps a human-readable hash (HGETALL
// NS:weights:latest) and a capped stream that wait_newer() blocks on.
#include "runtime/weight_registry.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "runtime/in_process_queue.h"
#include "runtime/redis_queue.h"
#include "runtime/redis_streams.h"
#include "runtime/trainer_lease.h"

namespace moerl::runtime {
namespace {

// After kEpochFencePrologue. KEYS[1] latest hash, KEYS[2] stream, KEYS[3] trainer epoch.
// ARGV: version, location, published ms, the writer's epoch. Returns 1 published, 2 exact repeat of the latest, 0 not newer (reply {0, latest}).
constexpr const char* kPublishBody = R"lua(
local cur = redis.call('HGET', KEYS[1], 'version')
if cur then
  if tonumber(cur) == tonumber(ARGV[1]) and redis.call('HGET', KEYS[1], 'location') == ARGV[2] then
    return {2, cur}
  end
  if tonumber(cur) >= tonumber(ARGV[1]) then return {0, cur} end
end
redis.call('HSET', KEYS[1], 'version', ARGV[1], 'location', ARGV[2], 'published_unix_ms', ARGV[3])
redis.call('XADD', KEYS[2], 'MAXLEN', '~', '64', '*', 'version', ARGV[1], 'location', ARGV[2],
           'published_unix_ms', ARGV[3])
return {1, ARGV[1]}
)lua";

Error not_newer(uint64_t version, const std::string& latest) {
  return Error("weight registry: version " + std::to_string(version) +
                   " is not newer than the published latest " + latest,
               "versions must increase; is another trainer publishing to the same namespace?");
}

uint64_t parse_version(const std::string& s) {
  try {
    return std::stoull(s);
  } catch (const std::exception&) {
    throw Error("weight registry: version field '" + s + "' is not a whole number",
                "the registry key was written by something else; use a fresh namespace",
                ErrorCode::kIo);
  }
}

}  // namespace

int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void InProcessWeightRegistry::publish(uint64_t version, const std::string& location,
                                      Deadline deadline) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (latest_ && latest_->version == version && latest_->location == location) return;
    if (latest_ && latest_->version >= version) {
      throw not_newer(version, std::to_string(latest_->version));
    }
    latest_ = WeightVersion{version, location, unix_ms_now()};
  }
  cv_.notify_all();
}

std::optional<WeightVersion> InProcessWeightRegistry::latest(Deadline deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  return latest_;
}

std::optional<WeightVersion> InProcessWeightRegistry::wait_newer(uint64_t version,
                                                                 Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  bool ok = wait_for_condition(cv_, lock, deadline,
                               [&] { return latest_ && latest_->version > version; });
  if (!ok) return std::nullopt;
  return latest_;
}

RedisWeightRegistry::RedisWeightRegistry(const RedisUrl& url, const std::string& ns,
                                         RedisOptions redis)
    : ns_(ns),
      stream_(RedisKeys(ns).weights),
      latest_key_(RedisKeys(ns).weights_latest),
      epoch_key_(RedisKeys(ns).trainer_epoch),
      client_(url, redis) {}

void RedisWeightRegistry::publish(uint64_t version, const std::string& location,
                                  Deadline deadline) {
  static const std::string script = std::string(kEpochFencePrologue) + kPublishBody;
  const std::string epoch = std::to_string(epoch_.load());
  RedisReply r = client_.command_ok({"EVAL", script, "3", latest_key_, stream_, epoch_key_,
                                     std::to_string(version), location, std::to_string(unix_ms_now()), epoch},
                                    deadline);
  throw_if_fenced(r, ns_, epoch, "weight version " + std::to_string(version) + " was not published");
  if (r.at(0).integer == 0) throw not_newer(version, r.at(1).str);
}

std::optional<std::pair<std::string, WeightVersion>> RedisWeightRegistry::newest(Deadline deadline) {
  RedisReply r = client_.command_ok({"XREVRANGE", stream_, "+", "-", "COUNT", "1"}, deadline);
  if (!r.is_array() || r.elements.empty()) return std::nullopt;
  const RedisReply& e = r.at(0);
  WeightVersion v;
  const RedisReply& f = e.at(1);
  for (size_t i = 0; i + 1 < f.elements.size(); i += 2) {
    const std::string& k = f.elements[i].str;
    const std::string& val = f.elements[i + 1].str;
    if (k == "version") v.version = parse_version(val);
    if (k == "location") v.location = val;
    if (k == "published_unix_ms") v.published_unix_ms = static_cast<int64_t>(parse_version(val));
  }
  return std::make_pair(e.at(0).str, v);
}

std::optional<WeightVersion> RedisWeightRegistry::latest(Deadline deadline) {
  auto n = newest(deadline);
  if (!n) return std::nullopt;
  return n->second;
}

std::optional<WeightVersion> RedisWeightRegistry::wait_newer(uint64_t version, Deadline deadline) {
  while (true) {
    auto n = newest(deadline);
    if (n && n->second.version > version) return n->second;
    if (deadline.expired()) return std::nullopt;
    // Block for any entry after the newest we saw: no publish can slip between the two calls.
    // Less than a tick left: poll (detail::block_seconds).
    const double block = detail::block_seconds(deadline, 1.0);
    if (block == 0) {
      detail::poll_pause(deadline);
      continue;
    }
    client_.command_ok({"XREAD", "COUNT", "1", "BLOCK", detail::ms(block), "STREAMS", stream_, n ? n->first : "0-0"},
                       deadline, block);
  }
}

}  // namespace moerl::runtime
