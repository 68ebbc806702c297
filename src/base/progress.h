// Progress display for long work (training steps, rollouts, downloads): a one-line bar
// redrawn in place on a terminal, or a plain line every few seconds when stderr is not a
// terminal (CI, log files), with step/total, percent, caller fields, elapsed time and an
// ETA from a smoothed rate.
//
//   Progress p("train", total_steps);
//   for (int64_t step = 1; step <= total_steps; ++step) {
//     ...
//     p.update(step, {{"reward", 0.42}, {"tok/s", 1234}});
//   }
//   p.finish();   // final line + newline (the destructor calls it too)
//
// Style: kAuto picks kBar when stderr is a TTY and kPlain otherwise; the environment
// variable MOERL_PROGRESS=bar|plain|off overrides kAuto (e.g. off for ranks other than 0).
// While a bar is on screen, MOERL_LOG lines clear it, print, and redraw it below.
// Thread-safety: update() and finish() may be called from any thread (internal mutex).
// Failure: never throws from update()/finish(); output errors are ignored.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moerl {

enum class ProgressStyle { kAuto, kBar, kPlain, kOff };

// Named values shown after the counts, in the order given.
using ProgressFields = std::vector<std::pair<std::string, double>>;

struct ProgressOptions {
  ProgressStyle style = ProgressStyle::kAuto;
  double redraw_interval_s = 0.1;  // bar: at most ~10 redraws per second
  double plain_interval_s = 5.0;   // plain: one line per this many seconds
  double rate_window_s = 20.0;     // time constant of the rate smoothing
  int64_t initial_step = 0;        // step count at construction (resumed runs)
  int bar_width = 20;              // characters between the brackets
  int columns = 0;                 // bar: line width; 0 = ask the terminal (fallback 100)
  std::string unit = "step";       // rate shown as "<x> step/s" or "<x> s/step"
  // Test seams: where text goes (default: write(2) to stderr) and the clock in seconds
  // (default: steady clock). Either may be left empty.
  std::function<void(std::string_view)> sink;
  std::function<double()> clock;
};

// Rate of a counter over time with exponential forgetting: each interval's steps and
// seconds are weighted by exp(-age / window_s), and rate = weighted steps / weighted
// seconds. Before any time has passed, rate() is NaN. Not thread-safe.
class RateEstimator {
 public:
  explicit RateEstimator(double window_s) : window_s_(window_s) {}
  void start(double t, double count);
  // A sample at time t; samples with no time elapsed are folded into the next one.
  void add(double t, double count);
  double rate() const;  // count units per second, NaN when unknown

 private:
  double window_s_;
  bool started_ = false;
  double last_t_ = 0, last_count_ = 0;
  double weighted_count_ = 0, weighted_seconds_ = 0;
};

class Progress {
 public:
  Progress(std::string label, int64_t total, ProgressOptions options = {});
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Records `step` (absolute, not a delta) and the fields (empty keeps the last ones);
  // draws when due.
  void update(int64_t step, const ProgressFields& fields = {});
  // Draws the final line (bar: followed by a newline). Idempotent.
  void finish();

  ProgressStyle style() const { return style_; }  // resolved: never kAuto
  double rate() const;         // smoothed steps per second, NaN when unknown
  double eta_seconds() const;  // NaN when unknown (no total, or no rate yet)
  // The current line in each style, without "\r" or "\n" (for tests and summaries).
  std::string plain_line() const;
  std::string bar_line() const;

 private:
  double now() const;
  void emit(std::string_view text);
  std::string plain_line_locked(bool final) const;
  std::string bar_line_locked() const;
  int columns() const;
  friend std::string progress_wrap_log_line(const std::string& line);

  const std::string label_;
  const int64_t total_;
  ProgressOptions opt_;
  ProgressStyle style_;
  double start_t_;
  mutable std::mutex mu_;
  // Guarded by mu_:
  int64_t step_;
  ProgressFields fields_;
  RateEstimator rate_;
  double last_draw_t_ = -1e300;
  bool drawn_ = false;
  bool finished_ = false;
};

// "0:07", "12:03", "1:02:03", "3d04:05:06"; "?" for NaN, negative or absurdly large values.
std::string format_duration(double seconds);
// Compact number for display: "0.42", "1234", "12.3k", "4.57M", "nan".
std::string format_progress_value(double v);

// For base/log.cc: when a bar is on screen, returns the text to write instead of `line`
// (clear the bar, the line, redraw the bar); otherwise returns `line` unchanged.
std::string progress_wrap_log_line(const std::string& line);

}  // namespace moerl
