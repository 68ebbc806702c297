// Line-oriented logging to stderr: "[moerl I 12:00:01.234 r0] message".
// Level from MOERL_LOG_LEVEL (debug|info|warn|error; default info), rank tag from RANK.
// Thread-safe: each line is written with one write(2).
//
//   MOERL_LOG(INFO) << "loaded " << n << " tensors";
#pragma once

#include <sstream>

namespace moerl {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

bool log_enabled(LogLevel level);
void set_log_level(LogLevel level);

class LogLine {
 public:
  explicit LogLine(LogLevel level) : level_(level) {}
  ~LogLine();
  template <typename T>
  LogLine& operator<<(const T& v) {
    os_ << v;
    return *this;
  }

 private:
  LogLevel level_;
  std::ostringstream os_;
};

}  // namespace moerl

#define MOERL_LOG_LEVEL_DEBUG ::moerl::LogLevel::kDebug
#define MOERL_LOG_LEVEL_INFO ::moerl::LogLevel::kInfo
#define MOERL_LOG_LEVEL_WARN ::moerl::LogLevel::kWarn
#define MOERL_LOG_LEVEL_ERROR ::moerl::LogLevel::kError
#define MOERL_LOG(level)                                  \
  if (!::moerl::log_enabled(MOERL_LOG_LEVEL_##level)) {   \
  } else                                                  \
    ::moerl::LogLine(MOERL_LOG_LEVEL_##level)
