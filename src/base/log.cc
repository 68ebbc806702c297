#include "base/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "base/env.h"
#include "base/progress.h"

namespace moerl {
namespace {

LogLevel level_from_env() {
  std::string v = env::get_or("MOERL_LOG_LEVEL", "info");
  if (v == "debug") return LogLevel::kDebug;
  if (v == "warn") return LogLevel::kWarn;
  if (v == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

std::atomic<int>& current_level() {
  static std::atomic<int> level{static_cast<int>(level_from_env())};
  return level;
}

}  // namespace

bool log_enabled(LogLevel level) { return static_cast<int>(level) >= current_level().load(); }
void set_log_level(LogLevel level) { current_level().store(static_cast<int>(level)); }

LogLine::~LogLine() {
  static const char kTag[] = {'D', 'I', 'W', 'E'};
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  int ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char head[64];
  static const std::string rank = env::get_or("RANK", "");
  std::snprintf(head, sizeof(head), "[moerl %c %02d:%02d:%02d.%03d%s%s] ",
                kTag[static_cast<int>(level_)], tm.tm_hour, tm.tm_min, tm.tm_sec, ms,
                rank.empty() ? "" : " r", rank.c_str());
  // A progress bar on screen is cleared first and redrawn after the line.
  std::string line = progress_wrap_log_line(head + os_.str() + "\n");
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace moerl
