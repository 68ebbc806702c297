// Reply parsing and blocking-read timing shared by the Redis Streams backends (redis_queue.cc:
// RedisTaskQueue, redis_experience_buffer.cc: RedisExperienceBuffer, weight_registry.cc:
// RedisWeightRegistry). Internal to runtime/.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/deadline.h"
#include "base/error.h"
#include "runtime/redis_client.h"

namespace moerl::runtime::detail {

inline bool is_nogroup(const RedisReply& r) { return r.is_error() && r.str.rfind("NOGROUP", 0) == 0; }

struct StreamEntry {
  std::string id;
  std::vector<std::pair<std::string, std::string>> fields;  // empty if deleted
  const std::string* field(const std::string& name) const {
    for (const auto& [k, v] : fields) {
      if (k == name) return &v;
    }
    return nullptr;
  }
};

inline std::vector<StreamEntry> parse_entries(const RedisReply& list) {
  std::vector<StreamEntry> out;
  if (!list.is_array()) return out;
  for (const RedisReply& e : list.elements) {
    StreamEntry se;
    se.id = e.at(0).str;
    const RedisReply& f = e.at(1);
    if (f.is_array()) {
      for (size_t i = 0; i + 1 < f.elements.size(); i += 2) {
        se.fields.emplace_back(f.elements[i].str, f.elements[i + 1].str);
      }
    }
    out.push_back(std::move(se));
  }
  return out;
}

// XREADGROUP / XREAD reply: nil, or [[stream, entries]].
inline std::vector<StreamEntry> parse_read(const RedisReply& r) {
  if (r.is_nil() || !r.is_array() || r.elements.empty()) return {};
  return parse_entries(r.at(0).at(1));
}

// Stream ids ("<ms>-<seq>") in stream order.
inline bool stream_id_less(const std::string& a, const std::string& b) {
  auto parts = [](const std::string& id) {
    const size_t dash = id.find('-');
    return std::make_pair(std::strtoull(id.c_str(), nullptr, 10),
                          dash == std::string::npos ? 0ull : std::strtoull(id.c_str() + dash + 1, nullptr, 10));
  };
  return parts(a) < parts(b);
}

inline void throw_if_error(const RedisReply& r, const std::string& what) {
  if (r.is_error()) {
    throw Error("redis " + what + " failed: " + r.str,
                "check that the server is Redis 7+ and the key is not used by something else",
                ErrorCode::kIo);
  }
}

inline std::string ms(double seconds) {
  return std::to_string(std::max<int64_t>(1, static_cast<int64_t>(seconds * 1000.0)));
}

// Redis ends a blocking read's timeout on its timer tick (serverCron, `hz` 10 by default), so
// a BLOCK returns up to ~100 ms late: BLOCK 2 took 80-90 ms on Redis 7.0. A read that must
// return by `deadline` therefore blocks for what is left less one tick (at most cap_seconds),
// and not at all (0: poll) when less than a tick is left; the caller then calls poll_pause()
// and polls again until the deadline.
constexpr double kRedisTickSeconds = 0.1;
inline double block_seconds(const Deadline& deadline, double cap_seconds) {
  const double left = deadline.remaining_seconds() - kRedisTickSeconds;
  return left < 0.001 ? 0.0 : std::min(left, cap_seconds);
}
// Between polls of a wait shorter than a tick: 2 ms, never past the deadline.
inline void poll_pause(const Deadline& deadline) {
  const double s = std::min(0.002, deadline.remaining_seconds());
  if (s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

}  // namespace moerl::runtime::detail
