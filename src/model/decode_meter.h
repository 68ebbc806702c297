// DecodeMeter: how full a long decode call keeps its rows and where its time goes, logged as
// it runs. A streaming rollout worker's generate() call lasts the whole RL run; its line says
// whether the rows starve (too few tasks ahead) or the time goes between decode steps
// (records, leases, version swaps, admissions), which is what the async run's tokens/s hinge
// on.
//
//   DecodeMeter meter(rows);
//   meter.enter(DecodePhase::kDecode);   ... decode steps, sampling, the host's look at them
//   meter.enter(DecodePhase::kRecords);  ... ended sequences handed to the stream (scoring)
//   meter.enter(DecodePhase::kLeases);   ... the stream's feed: new prompts in
//   meter.relabel(DecodePhase::kSwap);   ... that feed loaded a new weights version
//   meter.enter(DecodePhase::kAdmit);    ... free rows given waiting prompts (their prefill)
//   meter.count(steps_so_far, tokens_so_far);  // totals; then at most one line per interval:
//   // "decode: 1200 steps in 30.0 s, rows busy 132.0 of 256 (52%), 5280 tokens/s;
//   //  time: decode 80%, records 4%, leases 2%, swap 6%, admit 8%"
// Each phase's time runs from its enter() to the next. On a GPU the phases are host time:
// work a phase launches (an admission's prefill) is waited for by the next window's readback,
// so it shows up as decode time. Not thread-safe (one generating thread).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>

namespace moerl::model {

enum class DecodePhase { kDecode = 0, kRecords, kLeases, kSwap, kAdmit, kCount };

class DecodeMeter {
 public:
  // Logs (MOERL_LOG INFO) at most once per `every_s` seconds of `clock` (default: steady).
  explicit DecodeMeter(int64_t rows, double every_s = 30.0, std::function<double()> clock = {});
  // Logs the last interval too when it is at least a third of every_s long.
  ~DecodeMeter();
  DecodeMeter(const DecodeMeter&) = delete;
  DecodeMeter& operator=(const DecodeMeter&) = delete;

  void enter(DecodePhase phase);
  // The phase running now counts as `phase` (from its enter()): e.g. a feed that swapped weights.
  void relabel(DecodePhase phase) { phase_ = phase; }
  // The call's decode steps and tokens so far (totals, not deltas); logs when an interval has
  // passed.
  void count(int64_t steps, int64_t tokens);
  // The interval's line since the last one (and starts a new interval); "" before any step.
  std::string take_line();

 private:
  double now() const;
  void close_phase();
  void log_line();  // take_line(), logged unless empty

  const int64_t rows_;
  const double every_s_;
  std::function<double()> clock_;
  DecodePhase phase_ = DecodePhase::kDecode;
  double phase_t_ = 0, interval_t_ = 0;
  std::array<double, static_cast<size_t>(DecodePhase::kCount)> seconds_{};
  int64_t steps_ = 0, tokens_ = 0, line_steps_ = 0, line_tokens_ = 0;
};

}  // namespace moerl::model
