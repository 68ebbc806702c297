// Learning-rate schedule: linear warmup then cosine decay to min_lr_ratio * lr.
//
//   LrSchedule s{.lr = 3e-4, .warmup_steps = 10, .total_steps = 200, .min_lr_ratio = 0.1};
//   double lr = s.at(step);   // step counts from 0
#pragma once

#include <cstdint>

namespace moerl::train {

struct LrSchedule {
  double lr = 1e-3;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  double min_lr_ratio = 0.1;
  enum class Kind { kConstant, kCosine } kind = Kind::kCosine;

  double at(int64_t step) const;
};

}  // namespace moerl::train
