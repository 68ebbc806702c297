// Soft overlong penalty (DAPO).
#include "rl/reward_shaping.h"

#include "base/check.h"

namespace moerl::rl {

at::Tensor overlong_penalty(const at::Tensor& lengths_B, int64_t max_len, int64_t buffer_len) {
  MOERL_CHECK_EQ(lengths_B.dim(), 1);
  MOERL_CHECK_GT(max_len, 0);
  MOERL_CHECK(buffer_len >= 0 && buffer_len <= max_len) << "buffer_len " << buffer_len << ", max_len " << max_len;
  at::Tensor len = lengths_B.to(at::kDouble);
  if (buffer_len == 0) return -(len > static_cast<double>(max_len)).to(at::kDouble);
  double start = static_cast<double>(max_len - buffer_len);
  return -((len - start) / static_cast<double>(buffer_len)).clamp(0.0, 1.0);
}

}  // namespace moerl::rl
