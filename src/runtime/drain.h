// DrainController: the RUNNING -> DRAINING -> DRAINED state machine of a rollout worker that
// is being interrupted (SIGTERM from Kubernetes, or a Spot interruption notice). Draining
// means: take no new tasks, finish what fits before the deadline, hand the rest back, flush
// experience, exit 0 (run_worker_loop in worker_loop.h does this).
//
//   DrainController drain(/*drain_seconds=*/90);
//   DrainController::install_signal_handlers(&drain);   // SIGTERM / SIGINT start a drain
//   SpotWatcher spot(cfg, [&](const SpotNotice& n) { drain.request_drain("spot: " + n.action); });
//   while (drain.state() == DrainState::kRunning) { ... }
// Thread-safe. The signal handler only stores to lock-free atomics; the drain starts at the
// signal's time, observed by the next state() call. One controller per process may own the
// signal handlers; its destructor restores the default handlers.
#pragma once

#include <atomic>
#include <mutex>
#include <string>

#include "base/deadline.h"

namespace moerl::runtime {

enum class DrainState { kRunning = 0, kDraining = 1, kDrained = 2 };
const char* drain_state_name(DrainState s);

class DrainController {
 public:
  explicit DrainController(double drain_seconds = 90.0);
  ~DrainController();
  DrainController(const DrainController&) = delete;
  DrainController& operator=(const DrainController&) = delete;

  // RUNNING -> DRAINING with deadline now + drain_seconds. Idempotent: the first reason and
  // deadline win.
  void request_drain(const std::string& reason);
  // DRAINING (or RUNNING: a clean finish) -> DRAINED.
  void mark_drained();
  DrainState state() const;
  bool accepting_tasks() const { return state() == DrainState::kRunning; }
  // Deadline::never() while running.
  Deadline deadline() const;
  double remaining_seconds() const;
  // True while running, or when `seconds` of work still fits before the drain deadline.
  bool fits(double seconds) const;
  std::string reason() const;
  double drain_seconds() const { return drain_seconds_; }

  // Routes SIGTERM and SIGINT of this process to `c` (null uninstalls).
  static void install_signal_handlers(DrainController* c);

 private:
  void poll_signal() const;
  void begin(const std::string& reason, Deadline::Clock::time_point started) const;

  const double drain_seconds_;  // immutable after construction
  mutable std::mutex mu_;
  mutable std::atomic<int> state_{0};                 // DrainState; written under mu_
  mutable Deadline::Clock::time_point deadline_at_;   // guarded by mu_
  mutable std::string reason_;                        // guarded by mu_
};

}  // namespace moerl::runtime
