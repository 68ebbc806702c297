// The streaming rollout worker: GroupRollout::stream fed from a runtime::LeaseStream. Rows
// keep decoding while the task queue has work: units are leased as rows free up, each group's
// record is put as its last sample ends, and a newer staged version is activated between
// decode steps (its tokens' spans say so), so no step waits for a batch's longest answer.
#include <chrono>
#include <functional>

#include "base/log.h"
#include "base/seed.h"
#include "model/generate.h"
#include "rollout/worker.h"
#include "runtime/lease_stream.h"

namespace moerl::rollout {

namespace {

// A busy worker asks the queue at most this often while it finds no work, and does not wait
// for an answer that is not there yet: each ask is one pass of Redis round trips between two
// decode windows, which wait for it (a BLOCK, even of 2 ms, lasts until Redis's timer tick,
// ~100 ms: runtime/redis_streams.h).
constexpr double kBusyPollEvery = 0.05;
constexpr double kBusyPollWait = 0.0;

}  // namespace

class RolloutWorker::StreamSource final : public UnitSource {
 public:
  StreamSource(RolloutWorker& w, runtime::LeaseStream& leases, double poll_seconds)
      : w_(w), leases_(leases), poll_seconds_(poll_seconds) {}

  std::vector<runtime::TaskUnit> take(int64_t max_units, bool idle) override {
    if (!idle && now_seconds() - last_empty_ < kBusyPollEvery) return {};
    const int n = static_cast<int>(std::min<int64_t>(max_units, w_.setup_.runtime.tasks_per_lease));
    std::vector<runtime::TaskUnit> units;
    for (runtime::Lease& l : leases_.take(n, idle ? poll_seconds_ : kBusyPollWait)) units.push_back(std::move(l.task));
    if (units.empty()) last_empty_ = now_seconds();
    return units;
  }

  void done(runtime::ExperienceRecord rec) override {
    w_.stats_.last_version = w_.active_version_;
    leases_.complete(std::move(rec));
  }

  std::optional<uint64_t> refresh() override {
    std::optional<StagedWeights> staged;
    {
      std::lock_guard<std::mutex> lock(w_.mu_);
      staged = w_.take_newer_staged();
    }
    if (!staged) return std::nullopt;
    w_.activate(std::move(*staged));
    return w_.active_version_;
  }

  uint64_t version() const override { return w_.active_version_; }

 private:
  RolloutWorker& w_;
  runtime::LeaseStream& leases_;
  const double poll_seconds_;
  double last_empty_ = -1e9;
};

runtime::WorkerLoopResult RolloutWorker::run_stream(GroupRollout& gen, const runtime::WorkerLoopConfig& lc,
                                                    runtime::DrainController& drain,
                                                    runtime::Accounting* accounting) {
  runtime::LeaseStream leases(lc, *backends_.queue, *backends_.buffer, drain, accounting);
  StreamSource source(*this, leases, lc.poll_seconds);
  const runtime::WorkContext ctx(drain, drain_margin_);
  const uint64_t stream = std::hash<std::string>{}(options_.worker_id);
  try {
    for (uint64_t call = 0; drain.state() == runtime::DrainState::kRunning && !leases.exhausted(); ++call) {
      sync_version(drain);  // between calls, as the batch loop: a version being staged is worth a short wait
      // A drain lets the units in flight end (none is leased meanwhile) unless its deadline,
      // less the margin, comes first: then they are handed back.
      if (gen.stream(source, mix_seed(setup_.seed, stream, call), [&ctx] { return ctx.should_abort(); })) {
        ++stats_.batches;
      } else if (lc.on_idle) {
        lc.on_idle();
      }
    }
  } catch (const model::GenerationCancelled& c) {
    MOERL_LOG(WARN) << options_.worker_id << ": drain deadline reached " << c.steps() << " decode steps into a stream; "
                    << "handing back " << leases.held() << " task(s)";
    leases.hand_back_all();
  } catch (...) {
    leases.hand_back_all();
    throw;
  }
  return leases.finish();
}

}  // namespace moerl::rollout
