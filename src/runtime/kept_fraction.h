// KeptFraction: moving average of the fraction of prompt groups that dynamic sampling keeps
// (runtime::has_signal), used to size how many more prompts to draw (sync job) or to keep
// queued ahead (AsyncController). Starts at 1 (no filtering seen yet); each group weighs
// 0.05, so the average follows about the last 20 groups as the policy's success rate moves.
//
//   KeptFraction k;
//   for (const auto& r : records) k.observe(has_signal(r));
//   int64_t more = std::ceil(missing / k.value());
// Plain value type; not thread-safe.
#pragma once

#include <algorithm>

namespace moerl::runtime {

class KeptFraction {
 public:
  void observe(bool kept) { value_ += kWeight * ((kept ? 1.0 : 0.0) - value_); }
  // Never below `floor` (> 0), so callers can divide by it.
  double value(double floor = 1e-3) const { return std::max(value_, floor); }
  // The average as it stands (no floor), and setting it back: checkpoints carry it so a
  // resumed run sizes its rounds as the uninterrupted one would.
  double raw() const { return value_; }
  void set_raw(double v) { value_ = v; }

 private:
  static constexpr double kWeight = 0.05;
  double value_ = 1.0;
};

}  // namespace moerl::runtime
