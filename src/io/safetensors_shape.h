// Shape helpers shared by the safetensors reader and writer. Internal to io/; libtorch-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moerl::io::detail {

inline std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// numel * elem, or nullopt on overflow of size_t.
inline std::optional<size_t> byte_size(const std::vector<int64_t>& shape, size_t elem) {
  size_t n = elem;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (__builtin_mul_overflow(n, static_cast<size_t>(d), &n)) return std::nullopt;
  }
  return n;
}

}  // namespace moerl::io::detail
