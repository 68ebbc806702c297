// DedupeWindow: taken keys above a settled watermark.
#include "runtime/dedupe_window.h"

#include <algorithm>
#include <utility>

namespace moerl::runtime {

bool DedupeWindow::admit(const std::string& key, uint64_t cursor) {
  if (cursor < settled_below_) return false;
  return keys_.emplace(key, cursor).second;
}

void DedupeWindow::reserve(const std::string& key, uint64_t cursor) {
  if (cursor >= settled_below_) keys_.emplace(key, cursor);
}

bool DedupeWindow::taken(const std::string& key, uint64_t cursor) const {
  return cursor < settled_below_ || keys_.count(key) > 0;
}

void DedupeWindow::settle_below(uint64_t cursor) {
  if (cursor <= settled_below_) return;
  settled_below_ = cursor;
  std::erase_if(keys_, [&](const auto& kv) { return kv.second < cursor; });
}

void DedupeWindow::restore(std::map<std::string, uint64_t> keys, uint64_t settled_below) {
  keys_ = std::move(keys);
  settled_below_ = 0;
  settle_below(settled_below);
}

}  // namespace moerl::runtime
