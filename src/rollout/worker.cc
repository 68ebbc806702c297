// The rollout worker role: version staging/activation around runtime::run_worker_loop, with
// the tasks of one lease generated in one batched call.
#include "rollout/worker.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>

#include "base/files.h"
#include "base/error.h"
#include "base/log.h"
#include "runtime/spot_watcher.h"

namespace moerl::rollout {

namespace fs = std::filesystem;

namespace {

// How long a batch waits for a version announced but still being staged.
constexpr auto kStagingWait = std::chrono::seconds(2);

// Reward functions are not promised to be thread-safe; in-process workers share one, so its
// score() calls are serialised (generation itself runs concurrently).
std::mutex g_reward_mu;

class SerializedReward final : public tasks::RewardFn {
 public:
  explicit SerializedReward(tasks::RewardFn& inner) : inner_(inner) {}
  std::string name() const override { return inner_.name(); }
  std::vector<double> score(const std::vector<tasks::TaskItem>& items,
                            const std::vector<std::string>& completions) override {
    std::lock_guard<std::mutex> lock(g_reward_mu);
    return inner_.score(items, completions);
  }
  tasks::RewardRange range() const override { return inner_.range(); }

 private:
  tasks::RewardFn& inner_;
};

// Forwards to the real queue and remembers the leases of the latest lease() call, so the
// process function can generate all of them in one batch.
class BatchingQueue final : public runtime::TaskQueue {
 public:
  explicit BatchingQueue(runtime::TaskQueue& q) : q_(q) {}
  void enqueue(const runtime::TaskUnit& t, Deadline d) override { q_.enqueue(t, d); }
  bool enqueue_from(const runtime::TaskUnit& t, uint64_t next, Deadline d) override {
    return q_.enqueue_from(t, next, d);
  }
  uint64_t producer_cursor(Deadline d) override { return q_.producer_cursor(d); }
  std::vector<runtime::Lease> lease(const std::string& w, int n, double s, Deadline d) override {
    std::vector<runtime::Lease> got = q_.lease(w, n, s, d);
    std::lock_guard<std::mutex> lock(mu_);
    batch_ = got;
    return got;
  }
  bool renew(const runtime::Lease& l, Deadline d) override { return q_.renew(l, d); }
  bool ack(const runtime::Lease& l, Deadline d) override { return q_.ack(l, d); }
  bool nack(const runtime::Lease& l, Deadline d) override { return q_.nack(l, d); }
  runtime::QueueDepth depth(Deadline d) override { return q_.depth(d); }
  std::vector<runtime::TaskUnit> dead_letters(Deadline d) override { return q_.dead_letters(d); }
  runtime::QueueStats stats() const override { return q_.stats(); }
  std::vector<runtime::Lease> batch() {
    std::lock_guard<std::mutex> lock(mu_);
    return batch_;
  }

 private:
  runtime::TaskQueue& q_;
  std::mutex mu_;
  std::vector<runtime::Lease> batch_;
};

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9E3779B97F4A7C15ull + b + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

RolloutWorker::RolloutWorker(WorkerSetup setup, runtime::RuntimeBackends backends, store::ObjectStore& store,
                             WorkerOptions options)
    : setup_(std::move(setup)), backends_(std::move(backends)), store_(store), options_(std::move(options)) {
  if (!setup_.tokenizer || !setup_.reward || !backends_.queue || !backends_.buffer || !backends_.weights) {
    throw Error("rollout worker " + options_.worker_id + ": setup lacks a tokenizer, reward, queue, buffer or registry",
                "build WorkerSetup from the job config and open_backends()", ErrorCode::kInvalidInput);
  }
}

RolloutWorker::~RolloutWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (stager_.joinable()) stager_.join();
}

// Background: wait for a newer version, download + verify it, leave it staged. Also drains
// the worker once the trainer has marked the run done.
void RolloutWorker::stage_loop(runtime::DrainController* drain) {
  const std::string scratch = (fs::path(options_.scratch_dir) / "stage").string();
  while (true) {
    uint64_t have;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      have = staged_version_;
    }
    try {
      if (store_.head(kRunDoneKey)) {
        drain->request_drain("trainer finished the run");
        return;
      }
      auto v = backends_.weights->wait_newer(have, Deadline::after_seconds(0.5));
      if (!v) continue;
      {
        std::lock_guard<std::mutex> lock(mu_);
        announced_version_ = std::max(announced_version_, v->version);
      }
      StagedWeights w = stage(v->location, scratch);
      std::lock_guard<std::mutex> lock(mu_);
      if (w.version > staged_version_) {
        if (staged_ && !staged_->dir.empty()) remove_tree(staged_->dir);
        staged_version_ = w.version;
        staged_ = std::move(w);
      }
      cv_.notify_all();
    } catch (const Error& e) {
      // A version pruned while we read it, or the registry briefly unreachable: try the newest.
      MOERL_LOG(WARN) << options_.worker_id << ": staging weights failed, retrying: " << e.what();
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(200), [&] { return stop_; });
    }
  }
}

StagedWeights RolloutWorker::stage(const std::string& location, const std::string& scratch) {
  if (WeightHandoff::is_memory_location(location)) {
    std::shared_ptr<const WeightSnapshot> snap = options_.handoff ? options_.handoff->get(location) : nullptr;
    if (!snap) {
      throw Error("rollout worker " + options_.worker_id + ": version at " + location + " is not in this process",
                  "in-memory versions reach only in-process workers; a newer one replaced it: stage the newest",
                  ErrorCode::kNotFound);
    }
    return StagedWeights{.version = snap->version, .dir = "", .params = snap->params};
  }
  return fetch_weights(store_, location, scratch);
}

void RolloutWorker::activate_staged() {
  std::optional<StagedWeights> w;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, kStagingWait, [&] { return stop_ || staged_version_ >= announced_version_; });
    if (!staged_ || staged_->version <= active_version_) return;
    w = std::move(staged_);
    staged_.reset();
  }
  policy_->load_weights(w->params);
  active_version_ = w->version;
  ++stats_.activations;
  if (!w->dir.empty()) remove_tree(w->dir);
}

WorkerStats RolloutWorker::run(runtime::DrainController& drain, runtime::Accounting* accounting) {
  if (options_.intra_op_threads > 0) at::set_num_threads(options_.intra_op_threads);
  fs::create_directories(options_.scratch_dir);
  // Late joiners start from the newest version.
  Deadline first = Deadline::after_seconds(options_.first_version_seconds);
  std::optional<runtime::WeightVersion> v;
  while (!v) {
    if (drain.state() != runtime::DrainState::kRunning || store_.head(kRunDoneKey)) {
      drain.mark_drained();
      stats_.loop.final_state = drain.state();
      return stats_;
    }
    v = backends_.weights->wait_newer(0, Deadline::after_seconds(0.5));
    if (!v) v = backends_.weights->latest(Deadline::after_seconds(5));  // version 0 itself
    if (!v && first.expired()) {
      throw Error("rollout worker " + options_.worker_id + ": no policy version was published within " +
                      std::to_string(options_.first_version_seconds) + " s",
                  "start the trainer (moerl trainer CONFIG) with the same [runtime] queue_url and namespace",
                  ErrorCode::kTimeout);
    }
  }
  for (int attempt = 0;; ++attempt) {
    try {
      if (auto snap = options_.handoff ? options_.handoff->get(v->location) : nullptr) {
        model::Params own;  // the model takes over its tensors: never the shared snapshot's
        for (const auto& [name, t] : snap->params) own.emplace(name, t.clone());
        policy_ = std::make_unique<model::Model>(snap->config, std::move(own), options_.model);
        active_version_ = snap->version;
        break;
      }
      StagedWeights w = fetch_weights(store_, v->location, (fs::path(options_.scratch_dir) / "init").string());
      policy_ = std::make_unique<model::Model>(model::load_model(w.dir, options_.model));
      active_version_ = w.version;
      remove_tree(w.dir);
      break;
    } catch (const Error& e) {
      if (attempt >= 20) throw;
      MOERL_LOG(WARN) << options_.worker_id << ": loading " << v->location << " failed (" << e.what()
                      << "); trying the newest version";
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (auto nv = backends_.weights->latest(Deadline::after_seconds(5))) v = nv;
    }
  }
  stats_.first_version = active_version_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    staged_version_ = active_version_;
  }
  stager_ = std::thread([this, &drain] { stage_loop(&drain); });
  std::unique_ptr<runtime::SpotWatcher> spot;
  if (setup_.runtime.spot_enabled) {
    spot = std::make_unique<runtime::SpotWatcher>(setup_.runtime.spot, [&drain](const runtime::SpotNotice& n) {
      drain.request_drain("spot notice: " + n.action + " at " + n.time);
    });
    spot->start();
  }

  BatchingQueue queue(*backends_.queue);
  SerializedReward reward(*setup_.reward);
  GroupRollout gen(*policy_, *setup_.tokenizer, reward, setup_.gen, options_.worker_id);
  std::map<std::string, runtime::ExperienceRecord> ready;  // lease id -> record of this batch
  const uint64_t worker_seed = mix(setup_.seed, std::hash<std::string>{}(options_.worker_id));
  runtime::ProcessFn process = [&](const runtime::TaskUnit&,
                                   const runtime::WorkContext& ctx) -> std::optional<runtime::ExperienceRecord> {
    auto it = ready.find(ctx.lease().lease_id);
    if (it == ready.end()) {
      if (ctx.should_abort()) return std::nullopt;
      // First task of a new lease batch: generate the batch from here on in one call, with
      // one version (activated before it, never during it).
      ready.clear();
      std::vector<runtime::Lease> batch = queue.batch();
      std::vector<runtime::TaskUnit> units;
      std::vector<std::string> ids;
      bool from_here = false;
      for (const runtime::Lease& l : batch) {
        from_here = from_here || l.lease_id == ctx.lease().lease_id;
        if (from_here) {
          units.push_back(l.task);
          ids.push_back(l.lease_id);
        }
      }
      if (units.empty()) {
        units.push_back(ctx.lease().task);
        ids.push_back(ctx.lease().lease_id);
      }
      activate_staged();
      std::vector<runtime::ExperienceRecord> recs =
          gen.run(units, mix(worker_seed, static_cast<uint64_t>(stats_.batches)), active_version_);
      ++stats_.batches;
      stats_.last_version = active_version_;
      for (size_t i = 0; i < recs.size(); ++i) {
        recs[i].attempt = units[i].attempt;
        recs[i].cursor = units[i].cursor;
        recs[i].worker_id = options_.worker_id;
        ready[ids[i]] = std::move(recs[i]);
      }
      it = ready.find(ctx.lease().lease_id);
    }
    runtime::ExperienceRecord rec = std::move(it->second);
    ready.erase(it);
    return rec;
  };
  runtime::WorkerLoopConfig lc = runtime::worker_loop_config(setup_.runtime, options_.worker_id);
  lc.max_tasks = options_.max_tasks;
  stats_.loop = runtime::run_worker_loop(lc, queue, *backends_.buffer, drain, process, accounting);
  if (spot) spot->stop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  stager_.join();
  return stats_;
}

}  // namespace moerl::rollout
