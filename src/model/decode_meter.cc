// DecodeMeter: interval totals of decode steps, tokens and per-phase host time, one line each.
#include "model/decode_meter.h"

#include <cstdio>

#include "base/deadline.h"
#include "base/log.h"

namespace moerl::model {

DecodeMeter::DecodeMeter(int64_t rows, double every_s, std::function<double()> clock)
    : rows_(rows), every_s_(every_s), clock_(std::move(clock)) {
  phase_t_ = interval_t_ = now();
}

DecodeMeter::~DecodeMeter() {
  if (now() - interval_t_ >= every_s_ / 3) log_line();
}

void DecodeMeter::log_line() {
  const std::string line = take_line();
  if (!line.empty()) MOERL_LOG(INFO) << line;
}

double DecodeMeter::now() const { return clock_ ? clock_() : now_seconds(); }

void DecodeMeter::close_phase() {
  const double t = now();
  seconds_[static_cast<size_t>(phase_)] += t - phase_t_;
  phase_t_ = t;
}

void DecodeMeter::enter(DecodePhase phase) {
  close_phase();
  phase_ = phase;
}

void DecodeMeter::count(int64_t steps, int64_t tokens) {
  steps_ = steps;
  tokens_ = tokens;
  if (now() - interval_t_ >= every_s_) log_line();
}

std::string DecodeMeter::take_line() {
  close_phase();
  const int64_t steps = steps_ - line_steps_, tokens = tokens_ - line_tokens_;
  const double wall = phase_t_ - interval_t_;
  double phases = 0;
  for (double s : seconds_) phases += s;
  std::string line;
  if (steps > 0 && wall > 0) {
    const double busy = static_cast<double>(tokens) / static_cast<double>(steps);
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "decode: %lld steps in %.1f s, rows busy %.1f of %lld (%.0f%%), %.0f tokens/s; "
                  "time: decode %.0f%%, records %.0f%%, leases %.0f%%, swap %.0f%%, admit %.0f%%",
                  static_cast<long long>(steps), wall, busy, static_cast<long long>(rows_),
                  100.0 * busy / static_cast<double>(rows_), static_cast<double>(tokens) / wall,
                  100.0 * seconds_[0] / phases, 100.0 * seconds_[1] / phases, 100.0 * seconds_[2] / phases,
                  100.0 * seconds_[3] / phases, 100.0 * seconds_[4] / phases);
    line = buf;
  }
  seconds_.fill(0);
  interval_t_ = phase_t_;
  line_steps_ = steps_;
  line_tokens_ = tokens_;
  return line;
}

}  // namespace moerl::model
