// DrainController and its async-signal-safe SIGTERM/SIGINT hook.
#include "runtime/drain.h"

#include <signal.h>
#include <time.h>

#include <cstring>

#include "base/error.h"
#include "base/log.h"

namespace moerl::runtime {
namespace {

std::atomic<DrainController*> g_controller{nullptr};
std::atomic<int> g_signal{0};
std::atomic<int64_t> g_signal_ns{0};  // CLOCK_MONOTONIC, the clock under steady_clock on Linux
static_assert(std::atomic<int64_t>::is_always_lock_free);
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_signal(int sig) {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // async-signal-safe
  int expected = 0;
  if (g_signal.compare_exchange_strong(expected, sig)) {
    g_signal_ns.store(static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec);
  }
}

}  // namespace

const char* drain_state_name(DrainState s) {
  switch (s) {
    case DrainState::kRunning: return "RUNNING";
    case DrainState::kDraining: return "DRAINING";
    case DrainState::kDrained: return "DRAINED";
  }
  return "?";
}

DrainController::DrainController(double drain_seconds) : drain_seconds_(drain_seconds) {
  if (!(drain_seconds > 0)) {
    throw Error("drain_seconds=" + std::to_string(drain_seconds) + ", expected > 0",
                "set runtime.drain_seconds (default 90; keep it below the pod's "
                "terminationGracePeriodSeconds)");
  }
}

DrainController::~DrainController() {
  DrainController* self = this;
  if (g_controller.compare_exchange_strong(self, nullptr)) install_signal_handlers(nullptr);
}

void DrainController::install_signal_handlers(DrainController* c) {
  g_controller.store(c);
  g_signal.store(0);
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = c ? on_signal : SIG_DFL;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

void DrainController::begin(const std::string& reason, Deadline::Clock::time_point started) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_.load() != static_cast<int>(DrainState::kRunning)) return;
  deadline_at_ = started + std::chrono::duration_cast<Deadline::Clock::duration>(
                               std::chrono::duration<double>(drain_seconds_));
  reason_ = reason;
  state_.store(static_cast<int>(DrainState::kDraining));
  MOERL_LOG(WARN) << "drain requested (" << reason << "): no new tasks; finishing what fits in "
                  << drain_seconds_ << " s, handing back the rest";
}

void DrainController::poll_signal() const {
  if (g_controller.load() != this) return;
  int sig = g_signal.load();
  if (sig == 0) return;
  auto at = Deadline::Clock::time_point(std::chrono::nanoseconds(g_signal_ns.load()));
  begin(sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "signal " + std::to_string(sig), at);
}

void DrainController::request_drain(const std::string& reason) {
  begin(reason, Deadline::Clock::now());
}

void DrainController::mark_drained() {
  std::lock_guard<std::mutex> lock(mu_);
  state_.store(static_cast<int>(DrainState::kDrained));
}

DrainState DrainController::state() const {
  poll_signal();
  return static_cast<DrainState>(state_.load());
}

Deadline DrainController::deadline() const {
  if (state() == DrainState::kRunning) return Deadline::never();
  std::lock_guard<std::mutex> lock(mu_);
  return Deadline::after_seconds(
      std::chrono::duration<double>(deadline_at_ - Deadline::Clock::now()).count());
}

double DrainController::remaining_seconds() const { return deadline().remaining_seconds(); }

bool DrainController::fits(double seconds) const {
  if (state() == DrainState::kRunning) return true;
  return remaining_seconds() > seconds;
}

std::string DrainController::reason() const {
  poll_signal();
  std::lock_guard<std::mutex> lock(mu_);
  return reason_;
}

}  // namespace moerl::runtime
