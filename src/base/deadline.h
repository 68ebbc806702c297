// Deadlines for every wait. A Deadline is a point on the steady clock; wait_until spins
// (with backoff) on a predicate and, on expiry, throws Error(kTimeout) saying who waited
// for what.
//
//   Deadline d = Deadline::after_seconds(30);
//   wait_until([&] { return arrived == expected; }, d, [&] { return "rank 0 waiting for ..."; });
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace moerl {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;
  static Deadline after_seconds(double s);
  static Deadline never();
  bool expired() const { return Clock::now() >= at_; }
  double remaining_seconds() const;
  Clock::time_point at() const { return at_; }

 private:
  explicit Deadline(Clock::time_point at) : at_(at) {}
  Clock::time_point at_;
};

// Polls `ready` until true or the deadline passes; `progress` is called between polls
// (e.g. to drive a completion queue) and may be empty. On timeout throws Error(kTimeout)
// with describe() as the message.
void wait_until(const std::function<bool()>& ready, const Deadline& deadline,
                const std::function<std::string()>& describe,
                const std::function<void()>& progress = {});

double now_seconds();  // steady clock, for durations

}  // namespace moerl
