#include "train/schedule.h"

#include <algorithm>
#include <cmath>

namespace moerl::train {

double LrSchedule::at(int64_t step) const {
  if (warmup_steps > 0 && step < warmup_steps) {
    return lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  }
  if (kind == Kind::kConstant) return lr;
  int64_t decay_steps = std::max<int64_t>(1, total_steps - warmup_steps);
  double progress = std::clamp(static_cast<double>(step - warmup_steps) / decay_steps, 0.0, 1.0);
  double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
  return lr * (min_lr_ratio + (1.0 - min_lr_ratio) * cosine);
}

}  // namespace moerl::train
