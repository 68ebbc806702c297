// Progress display: rate smoothing, line rendering in bar and plain styles, and the hook
// that lets log lines pass a bar that is on screen.
#include "base/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "base/env.h"

namespace moerl {
namespace {

// The bar that log lines must step around (at most one; the newest wins).
std::mutex g_active_mu;
Progress* g_active = nullptr;  // guarded by g_active_mu

void write_stderr(std::string_view text) {
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(STDERR_FILENO, text.data() + off, text.size() - off);
    if (n <= 0) return;  // NOTE: progress output is best effort
    off += static_cast<size_t>(n);
  }
}

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

ProgressStyle resolve_style(ProgressStyle requested, bool custom_sink) {
  if (requested != ProgressStyle::kAuto) return requested;
  std::string v = env::get_or("MOERL_PROGRESS", "auto");
  if (v == "bar") return ProgressStyle::kBar;
  if (v == "plain") return ProgressStyle::kPlain;
  if (v == "off") return ProgressStyle::kOff;
  if (custom_sink) return ProgressStyle::kPlain;
  return ::isatty(STDERR_FILENO) ? ProgressStyle::kBar : ProgressStyle::kPlain;
}

std::string rate_text(double rate, const std::string& unit) {
  if (!(rate > 0) || !std::isfinite(rate)) return "? " + unit + "/s";
  if (rate >= 1.0) return format_progress_value(rate) + " " + unit + "/s";
  return format_progress_value(1.0 / rate) + " s/" + unit;
}

std::string percent_text(int64_t step, int64_t total) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", 100.0 * static_cast<double>(step) / static_cast<double>(total));
  return buf;
}

}  // namespace

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e9) return "?";
  int64_t s = static_cast<int64_t>(std::llround(seconds));
  int64_t d = s / 86400, h = (s / 3600) % 24, m = (s / 60) % 60, sec = s % 60;
  char buf[48];
  if (d > 0) {
    std::snprintf(buf, sizeof(buf), "%lldd%02lld:%02lld:%02lld", static_cast<long long>(d),
                  static_cast<long long>(h), static_cast<long long>(m), static_cast<long long>(sec));
  } else if (h > 0) {
    std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", static_cast<long long>(h),
                  static_cast<long long>(m), static_cast<long long>(sec));
  } else {
    std::snprintf(buf, sizeof(buf), "%lld:%02lld", static_cast<long long>(m), static_cast<long long>(sec));
  }
  return buf;
}

std::string format_progress_value(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  static const struct {
    double scale;
    const char* suffix;
  } kUnits[] = {{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e4, "k"}};
  char buf[48];
  double a = std::fabs(v);
  if (a >= 1e15) {
    std::snprintf(buf, sizeof(buf), "%.3g", v);
    return buf;
  }
  for (const auto& u : kUnits) {
    double scale = u.scale == 1e4 ? 1e3 : u.scale;  // k from 10000 up: "1234" stays exact
    if (a >= u.scale) {
      std::snprintf(buf, sizeof(buf), "%.4g%s", v / scale, u.suffix);
      return buf;
    }
  }
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

void RateEstimator::start(double t, double count) {
  started_ = true;
  last_t_ = t;
  last_count_ = count;
  weighted_count_ = weighted_seconds_ = 0;
}

void RateEstimator::add(double t, double count) {
  if (!started_) {
    start(t, count);
    return;
  }
  double dt = t - last_t_;
  if (dt <= 0) return;  // same instant: the count delta joins the next interval
  double decay = window_s_ > 0 ? std::exp(-dt / window_s_) : 0.0;
  weighted_count_ = weighted_count_ * decay + (count - last_count_);
  weighted_seconds_ = weighted_seconds_ * decay + dt;
  last_t_ = t;
  last_count_ = count;
}

double RateEstimator::rate() const {
  if (!(weighted_seconds_ > 0)) return std::nan("");
  return weighted_count_ / weighted_seconds_;
}

Progress::Progress(std::string label, int64_t total, ProgressOptions options)
    : label_(std::move(label)),
      total_(total),
      opt_(std::move(options)),
      style_(resolve_style(opt_.style, static_cast<bool>(opt_.sink))),
      start_t_(opt_.clock ? opt_.clock() : steady_seconds()),
      step_(opt_.initial_step),
      rate_(opt_.rate_window_s) {
  rate_.start(start_t_, static_cast<double>(step_));
  if (style_ == ProgressStyle::kBar && !opt_.sink) {
    std::lock_guard<std::mutex> lock(g_active_mu);
    g_active = this;
  }
}

Progress::~Progress() {
  finish();
  std::lock_guard<std::mutex> lock(g_active_mu);
  if (g_active == this) g_active = nullptr;
}

double Progress::now() const { return opt_.clock ? opt_.clock() : steady_seconds(); }

void Progress::emit(std::string_view text) {
  if (opt_.sink) {
    opt_.sink(text);
  } else {
    write_stderr(text);
  }
}

void Progress::update(int64_t step, const ProgressFields& fields) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  double t = now();
  if (step < step_) rate_.start(t, static_cast<double>(step));  // counter went back: restart
  step_ = step;
  if (!fields.empty()) fields_ = fields;
  rate_.add(t, static_cast<double>(step));
  if (style_ == ProgressStyle::kOff) return;
  bool at_end = total_ > 0 && step >= total_;
  if (style_ == ProgressStyle::kBar) {
    if (t - last_draw_t_ < opt_.redraw_interval_s && !at_end) return;
    emit("\r" + bar_line_locked() + "\x1b[K");
  } else {
    if (drawn_ && t - last_draw_t_ < opt_.plain_interval_s) return;
    emit(plain_line_locked(false) + "\n");
  }
  last_draw_t_ = t;
  drawn_ = true;
}

void Progress::finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    finished_ = true;
    if (style_ == ProgressStyle::kBar) {
      emit("\r" + bar_line_locked() + "\x1b[K\n");
    } else if (style_ == ProgressStyle::kPlain) {
      emit(plain_line_locked(true) + "\n");
    }
  }
  std::lock_guard<std::mutex> lock(g_active_mu);
  if (g_active == this) g_active = nullptr;
}

double Progress::rate() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rate_.rate();
}

double Progress::eta_seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  double r = rate_.rate();
  if (total_ <= 0 || !(r > 0)) return std::nan("");
  return std::max<double>(0.0, static_cast<double>(total_ - step_)) / r;
}

std::string Progress::plain_line() const {
  std::lock_guard<std::mutex> lock(mu_);
  return plain_line_locked(finished_);
}

std::string Progress::bar_line() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bar_line_locked();
}

// "train 120/1000 (12.0%) reward=0.42 tok/s=1234 | 3.5 step/s, elapsed 0:34, eta 4:11"
std::string Progress::plain_line_locked(bool final) const {
  std::string s = label_ + " " + std::to_string(step_);
  if (total_ > 0) s += "/" + std::to_string(total_) + " (" + percent_text(step_, total_) + ")";
  for (const auto& [k, v] : fields_) s += " " + k + "=" + format_progress_value(v);
  double r = rate_.rate();
  s += " | " + rate_text(r, opt_.unit) + ", elapsed " + format_duration(now() - start_t_);
  if (final) {
    s += ", done";
  } else if (total_ > 0) {
    double eta = r > 0 ? std::max<double>(0.0, static_cast<double>(total_ - step_)) / r : std::nan("");
    s += ", eta " + format_duration(eta);
  }
  return s;
}

// "train  12% [==>       ] 120/1000 reward 0.42 tok/s 1234 | 0:34<4:11, 3.5 step/s"
std::string Progress::bar_line_locked() const {
  std::string s = label_;
  double r = rate_.rate();
  if (total_ > 0) {
    double frac = std::clamp(static_cast<double>(step_) / static_cast<double>(total_), 0.0, 1.0);
    char pct[16];
    std::snprintf(pct, sizeof(pct), " %3d%% ", static_cast<int>(std::floor(frac * 100.0)));
    int w = std::max(1, opt_.bar_width);
    int filled = static_cast<int>(std::floor(frac * w));
    std::string bar(static_cast<size_t>(w), ' ');
    for (int i = 0; i < filled; ++i) bar[static_cast<size_t>(i)] = '=';
    if (filled < w) bar[static_cast<size_t>(filled)] = '>';
    s += pct + ("[" + bar + "] ") + std::to_string(step_) + "/" + std::to_string(total_);
  } else {
    s += " " + std::to_string(step_);
  }
  for (const auto& [k, v] : fields_) s += " " + k + " " + format_progress_value(v);
  s += " | " + format_duration(now() - start_t_);
  if (total_ > 0) {
    double eta = r > 0 ? std::max<double>(0.0, static_cast<double>(total_ - step_)) / r : std::nan("");
    s += "<" + format_duration(eta);
  }
  s += ", " + rate_text(r, opt_.unit);
  size_t cols = static_cast<size_t>(std::max(10, columns()));
  if (s.size() > cols - 1) s.resize(cols - 1);  // a wrapped line breaks "\r" redraws
  return s;
}

int Progress::columns() const {
  if (opt_.columns > 0) return opt_.columns;
  struct winsize ws {};
  if (!opt_.sink && ::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 100;
}

std::string progress_wrap_log_line(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_active_mu);
  if (g_active == nullptr) return line;
  std::lock_guard<std::mutex> inner(g_active->mu_);
  if (!g_active->drawn_ || g_active->finished_) return line;
  return "\r\x1b[K" + line + "\r" + g_active->bar_line_locked() + "\x1b[K";
}

}  // namespace moerl
