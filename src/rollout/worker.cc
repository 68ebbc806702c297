// The rollout worker role: version staging/activation around runtime::run_worker_loop, whose
// batch function generates the tasks of one lease in one batched call; on an instance of
// several ranks, the leader's loop and the followers' (rollout/instance.h).
#include "rollout/worker.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>
#include <utility>

#include "base/check.h"
#include "base/files.h"
#include "base/error.h"
#include "base/log.h"
#include "base/seed.h"
#include "model/generate.h"
#include "model/thread_stream.h"
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

}  // namespace

RolloutWorker::RolloutWorker(WorkerSetup setup, runtime::RuntimeBackends backends, store::ObjectStore& store,
                             WorkerOptions options)
    : setup_(std::move(setup)), backends_(std::move(backends)), store_(store), options_(std::move(options)) {
  if (!setup_.tokenizer || !setup_.reward || !backends_.queue || !backends_.buffer || !backends_.weights) {
    throw Error("rollout worker " + options_.worker_id + ": setup lacks a tokenizer, reward, queue, buffer or registry",
                "build WorkerSetup from the job config and open_backends()", ErrorCode::kInvalidInput);
  }
  if (options_.instance && options_.instance->world_size() > 1) {
    if (!options_.model.ep_group || options_.model.ep_group->world_size() != options_.instance->world_size()) {
      throw Error("rollout worker " + options_.worker_id + ": an instance of " +
                      std::to_string(options_.instance->world_size()) + " ranks needs an EP group of as many ranks",
                  "build both from the same launch (job::join_rollout_instance)", ErrorCode::kInvalidInput);
    }
    link_ = std::make_unique<InstanceLink>(options_.instance);
    wanted_ = local_tensors(*options_.model.ep_group);
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
  if (is_shared_location(location)) {
    SharedWeights s = read_shared_weights(location, wanted_);
    return StagedWeights{.version = s.version, .dir = "", .params = std::move(s.params)};
  }
  return fetch_weights(store_, location, scratch, wanted_);
}

void RolloutWorker::agree_drain(bool draining_somewhere, runtime::DrainController& drain) {
  if (draining_somewhere && drain.state() == runtime::DrainState::kRunning) {
    drain.request_drain("another rank of rollout instance " + options_.worker_id + " is draining");
  }
}

void RolloutWorker::sync_version(runtime::DrainController& drain) {
  std::optional<StagedWeights> w;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, kStagingWait, [&] { return stop_ || staged_version_ >= announced_version_; });
    w = take_newer_staged();
  }
  uint64_t use = w ? w->version : active_version_;
  if (link_) {
    // NOTE: the candidate is out of staged_, so the stager cannot swap it between the agreement
    // and the activation: every rank activates exactly the agreed version or none.
    InstanceAgreement a = link_->agree(drain.state() != runtime::DrainState::kRunning, use);
    agree_drain(a.draining, drain);
    use = a.common_staged();
    if (w && use != w->version) ++stats_.version_splits;
  }
  if (!w) return;
  if (use != w->version) {  // another rank lacks it: keep it staged unless a newer one came
    std::lock_guard<std::mutex> lock(mu_);
    if (!staged_) {
      staged_ = std::move(w);
    } else if (!w->dir.empty()) {
      remove_tree(w->dir);
    }
    return;
  }
  activate(std::move(*w));
}

std::optional<StagedWeights> RolloutWorker::take_newer_staged() {
  if (staged_ && staged_->version <= active_version_) staged_.reset();
  return std::exchange(staged_, std::nullopt);
}

void RolloutWorker::activate(StagedWeights w) {
  policy_->load_weights(w.params);
  model::synchronize_stream(options_.model.device);  // done reading the trainer's snapshot
  active_version_ = w.version;
  ++stats_.activations;
  if (!w.dir.empty()) remove_tree(w.dir);
}

std::optional<runtime::WeightVersion> RolloutWorker::wait_first_version(runtime::DrainController& drain,
                                                                        const Deadline& first,
                                                                        std::optional<uint64_t> unloadable) {
  double last_warn = -1e9;
  while (true) {
    if (drain.state() != runtime::DrainState::kRunning || store_.head(kRunDoneKey)) return std::nullopt;
    std::optional<runtime::WeightVersion> v;
    try {
      v = backends_.weights->wait_newer(unloadable.value_or(0), Deadline::after_seconds(0.5));
      if (!v && !unloadable) v = backends_.weights->latest(Deadline::after_seconds(5));  // version 0 itself
    } catch (const Error& e) {
      // The registry (Redis) restarting or not up yet: keep asking until the first deadline.
      if (e.code() != ErrorCode::kUnavailable && e.code() != ErrorCode::kTimeout) throw;
      if (now_seconds() - last_warn >= 10) {
        MOERL_LOG(WARN) << options_.worker_id << ": weight registry unreachable, still waiting for the first policy version: "
                        << e.what();
        last_warn = now_seconds();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (v) return v;
    if (first.expired()) {
      throw Error("rollout worker " + options_.worker_id + ": no policy version " +
                      (unloadable ? "newer than the unloadable v" + std::to_string(*unloadable) + " " : std::string()) +
                      "was published within " + std::to_string(options_.first_version_seconds) + " s",
                  "start the trainer (moerl trainer CONFIG) with the same [runtime] queue_url and namespace, and "
                  "give the workers the trainer's store ([store] uri or --run-dir)",
                  ErrorCode::kTimeout);
    }
    if (link_) link_->group().broadcast("W");  // a heartbeat: the followers keep waiting
  }
}

bool RolloutWorker::load_first_version(runtime::DrainController& drain) {
  const Deadline first = Deadline::after_seconds(options_.first_version_seconds);
  // A version that failed to load (an earlier run's, named by a registry this run's store does
  // not match; one pruned meanwhile): the next one tried is newer, up to the first deadline.
  std::optional<uint64_t> unloadable;
  while (true) {
    // The leader picks the version ("L" + location; "S": drained first), every rank loads it.
    std::string pick;
    uint64_t picked = 0;
    if (leader()) {
      std::optional<runtime::WeightVersion> v = wait_first_version(drain, first, unloadable);
      pick = v ? "L" + v->location : "S";
      picked = v ? v->version : 0;
    }
    if (link_) {
      do {
        pick = link_->group().broadcast(pick);
      } while (pick == "W");
    }
    if (pick == "S") return false;
    const std::string location = pick.substr(1);
    std::string failure;
    try {
      if (auto snap = options_.handoff ? options_.handoff->get(location) : nullptr) {
        model::Params own;  // the model takes over its tensors: never the shared snapshot's
        for (const auto& [name, t] : snap->params) own.emplace(name, t.clone());
        policy_ = std::make_unique<model::Model>(snap->config, std::move(own), options_.model);
        active_version_ = snap->version;
      } else if (is_shared_location(location)) {
        SharedWeights s = read_shared_weights(location, wanted_);
        policy_ = std::make_unique<model::Model>(std::move(s.config), std::move(s.params), options_.model);
        active_version_ = s.version;
      } else {
        StagedWeights w = fetch_weights(store_, location, (fs::path(options_.scratch_dir) / "init").string(), wanted_);
        policy_ = std::make_unique<model::Model>(model::load_model(w.dir, options_.model));
        active_version_ = w.version;
        remove_tree(w.dir);
      }
    } catch (const Error& e) {
      failure = e.what();
    }
    model::synchronize_stream(options_.model.device);  // done reading the trainer's snapshot
    // Every rank must hold the same version: a failure anywhere makes all of them retry.
    const bool failed = link_ ? link_->group().any(!failure.empty()) : !failure.empty();
    if (!failed) return true;
    MOERL_LOG(WARN) << options_.worker_id << ": loading " << location << " failed ("
                    << (failure.empty() ? "on another rank" : failure) << "); waiting for a newer version";
    unloadable = picked;
  }
}

std::vector<std::optional<runtime::ExperienceRecord>> RolloutWorker::run_batch(GroupRollout& gen,
                                                                               const InstanceMessage& m,
                                                                               runtime::DrainController& drain) {
  const size_t n = m.units.size();
  std::vector<std::optional<runtime::ExperienceRecord>> out;
  sync_version(drain);
  const runtime::WorkContext ctx(drain, drain_margin_);
  if (!link_ && ctx.should_abort()) return decltype(out)(n);  // hand the batch back
  const int rank = link_ ? link_->rank() : 0;
  const std::vector<runtime::TaskUnit> units = link_ ? link_->share(m.units) : m.units;
  const uint64_t stream = std::hash<std::string>{}(options_.worker_id) + static_cast<uint64_t>(rank);
  std::function<bool()> cancel = [&ctx] { return ctx.should_abort(); };
  if (link_) {
    lockstep_ = std::make_unique<LockstepGeneration>(link_->group(), cancel);
    cancel = [this] { return lockstep_->cancel(); };
  }
  std::vector<runtime::ExperienceRecord> recs;
  try {
    // A drain whose deadline (less the margin) arrives mid-batch abandons the generation (on
    // every rank of an instance at the same decode step).
    recs = gen.run(units, mix_seed(setup_.seed, stream, m.batch), active_version_, cancel);
  } catch (const moerl::model::GenerationCancelled& c) {
    MOERL_LOG(WARN) << options_.worker_id << ": drain deadline reached " << c.steps() << " tokens into a batch of "
                    << n << " task(s); handing them back";
    return decltype(out)(n);
  }
  ++stats_.batches;
  stats_.last_version = active_version_;
  MOERL_CHECK_EQ(recs.size(), units.size());  // gen.run answers every unit, in order
  if (link_) recs = link_->collect(recs, n);
  for (size_t i = 0; i < recs.size(); ++i) {
    recs[i].attempt = m.units[i].attempt;
    recs[i].cursor = m.units[i].cursor;
    recs[i].worker_id = options_.worker_id;
    out.push_back(std::move(recs[i]));
  }
  return out;
}

void RolloutWorker::follow(GroupRollout& gen, runtime::DrainController& drain) {
  while (true) {
    InstanceMessage m = link_->receive();
    if (m.command == InstanceCommand::kStop) break;
    if (m.command == InstanceCommand::kIdle) {
      agree_drain(link_->agree(drain.state() != runtime::DrainState::kRunning, 0).draining, drain);
      continue;
    }
    run_batch(gen, m, drain);
  }
  if (drain.state() == runtime::DrainState::kDraining) drain.mark_drained();
  stats_.loop.final_state = drain.state();
}

WorkerStats RolloutWorker::run(runtime::DrainController& drain, runtime::Accounting* accounting) {
  if (options_.intra_op_threads > 0) at::set_num_threads(options_.intra_op_threads);
  // On a GPU the worker's kernels go to a stream of its own, beside a trainer in this process.
  const model::ThreadStream own_stream(options_.model.device);
  fs::create_directories(options_.scratch_dir);
  if (!load_first_version(drain)) {  // late joiners start from the newest version
    drain.mark_drained();
    stats_.loop.final_state = drain.state();
    return stats_;
  }
  stats_.first_version = active_version_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    staged_version_ = active_version_;
  }
  stager_ = std::thread([this, &drain] { stage_loop(&drain); });
  std::unique_ptr<runtime::SpotWatcher> spot;
  if (setup_.runtime.spot_enabled && leader()) {  // one node, one notice: the leader's
    spot = std::make_unique<runtime::SpotWatcher>(setup_.runtime.spot, [&drain](const runtime::SpotNotice& n) {
      drain.request_drain("spot notice: " + n.action + " at " + n.time);
    });
    spot->start();
  }

  SerializedReward reward(*setup_.reward);
  RolloutConfig rc = setup_.gen;
  if (link_) rc.all_done = [this](bool local_done) { return lockstep_->all_done(local_done); };
  GroupRollout gen(*policy_, *setup_.tokenizer, reward, rc, options_.worker_id);
  runtime::WorkerLoopConfig lc = runtime::worker_loop_config(setup_.runtime, options_.worker_id);
  lc.max_tasks = options_.max_tasks;
  drain_margin_ = lc.drain_margin_seconds;
  if (!leader()) {
    follow(gen, drain);
  } else if (setup_.gen.streaming && !link_) {
    stats_.loop = run_stream(gen, lc, drain, accounting);
  } else {
    // One lease's tasks in one generate() call (spread over the instance's ranks), with one
    // version, activated before it, never during it.
    runtime::ProcessBatchFn process = [&](const std::vector<runtime::Lease>& leases, const runtime::WorkContext&) {
      InstanceMessage m{.command = InstanceCommand::kBatch, .batch = static_cast<uint64_t>(stats_.batches)};
      for (const runtime::Lease& l : leases) m.units.push_back(l.task);
      if (link_) link_->send(m);
      return run_batch(gen, m, drain);
    };
    if (link_) {
      lc.on_idle = [&] {
        link_->send({.command = InstanceCommand::kIdle});
        agree_drain(link_->agree(drain.state() != runtime::DrainState::kRunning, 0).draining, drain);
      };
    }
    stats_.loop = runtime::run_worker_loop(lc, *backends_.queue, *backends_.buffer, drain, process, accounting);
    if (link_) link_->send({.command = InstanceCommand::kStop});
  }
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
