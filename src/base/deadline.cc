#include "base/deadline.h"

#include <thread>

#include "base/error.h"

namespace moerl {

Deadline Deadline::after_seconds(double s) {
  return Deadline(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(s)));
}

Deadline Deadline::never() { return Deadline(Clock::time_point::max()); }

double Deadline::remaining_seconds() const {
  if (at_ == Clock::time_point::max()) return 1e18;
  return std::chrono::duration<double>(at_ - Clock::now()).count();
}

void wait_until(const std::function<bool()>& ready, const Deadline& deadline,
                const std::function<std::string()>& describe,
                const std::function<void()>& progress) {
  int spins = 0;
  while (!ready()) {
    if (deadline.expired()) {
      throw Error(describe(), "a peer is dead, hung or far slower than expected; check its log",
                  ErrorCode::kTimeout);
    }
    if (progress) progress();
    // Spin briefly for latency, then yield, then sleep so a stuck wait does not burn a core.
    if (++spins > 2000) {
      std::this_thread::sleep_for(std::chrono::microseconds(spins > 20000 ? 200 : 20));
    } else if (spins > 200) {
      std::this_thread::yield();
    }
  }
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace moerl
