// The rollout worker role: leases task units (prompt groups), generates and scores them with
// the newest policy version it has, and puts the experience into the buffer, through
// runtime::run_worker_loop (leases renewed while it works; SIGTERM / Spot notice -> drain,
// exit 0). A background stager waits for newer weight versions (WeightRegistry::wait_newer),
// downloads and verifies them while generation goes on; the worker ACTIVATES a staged version
// only between generate() calls, so one forward pass never mixes two versions, and every
// sample records the version that produced it (runtime::VersionSpan). A batch starts on the
// newest announced version: if its staging is under way, the worker waits for it (bounded),
// since a batch started on the older one would reach the trainer a version staler. The loop
// hands the worker each lease() batch whole: its tasks are generated together in ONE batched
// generate() call, sampled with mix_seed(setup.seed, hash(worker_id) + rank, batch count).
// With [rollout] streaming (one rank), the worker keeps batch_rows rows decoding instead:
// it leases units as rows free up, puts each group's record as its last sample ends, and
// activates newer versions between decode steps, so a sample may span versions
// (rollout/worker_stream.cc). A worker may be one rollout instance of several ranks (options.instance; rollout/instance.h):
// then every rank runs a RolloutWorker over its share of the experts, rank 0 alone leases,
// puts and acks, each batch's units are spread over the ranks, and each rank stages only the
// files of a published version that hold its tensors.
//
//   RolloutWorker w(setup, backends, store, {.worker_id = "pod-3", .scratch_dir = "/tmp/w3"});
//   runtime::WorkerLoopResult r = w.run(drain);   // returns after a drain or the trainer's end
// Thread-safety: one thread runs a worker; several workers may share in-process backends.
// Failures: no weight version within options.first_version_seconds -> moerl::Error(kTimeout).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "model/model.h"
#include "model/tokenizer.h"
#include "ep/torch/control_group.h"
#include "rollout/group_rollout.h"
#include "rollout/instance.h"
#include "rollout/weight_handoff.h"
#include "rollout/weight_publisher.h"
#include "runtime/accounting.h"
#include "runtime/drain.h"
#include "runtime/runtime_config.h"
#include "runtime/worker_loop.h"
#include "store/object_store.h"
#include "tasks/reward_fn.h"

namespace moerl::rollout {

struct WorkerSetup {
  const model::Tokenizer* tokenizer = nullptr;
  tasks::RewardFn* reward = nullptr;   // score() calls are serialised (one mutex per process)
  RolloutConfig gen;
  runtime::RuntimeConfig runtime;
  uint64_t seed = 0;
};

struct WorkerOptions {
  std::string worker_id = "worker-0";
  std::string scratch_dir = "/tmp/moerl-worker";
  double first_version_seconds = 600;  // wait this long for the trainer's first version
  int64_t max_tasks = 0;               // stop after this many tasks (0 = until drained / done)
  int intra_op_threads = 0;            // at::set_num_threads for this thread (0 = leave)
  model::ModelOptions model;           // device and dtype of the worker's policy copy
  // In-process workers: the trainer's in-memory versions ("memory:vN" locations). Without
  // it, every version is read from the object store.
  std::shared_ptr<const WeightHandoff> handoff;
  // The ranks of a multi-rank rollout instance (with model.ep_group sharding the experts
  // the same way); null or one rank: a single-process worker.
  std::shared_ptr<ep::ControlGroup> instance;
};

// The object-store key a trainer writes when the run is over; workers drain when they see it.
inline constexpr const char* kRunDoneKey = "control/run_done";

struct WorkerStats {
  runtime::WorkerLoopResult loop;
  uint64_t first_version = 0;
  uint64_t last_version = 0;
  int64_t activations = 0;   // versions activated after the first
  int64_t batches = 0;       // generate() calls
  int64_t version_splits = 0;  // batches run on the active version because ranks had staged different ones
};

class RolloutWorker {
 public:
  RolloutWorker(WorkerSetup setup, runtime::RuntimeBackends backends, store::ObjectStore& store,
                WorkerOptions options);
  ~RolloutWorker();
  RolloutWorker(const RolloutWorker&) = delete;
  RolloutWorker& operator=(const RolloutWorker&) = delete;

  // Loads the newest version, then runs the worker loop until `drain` completes (SIGTERM,
  // Spot notice, request_drain) or the trainer marks the run done. On a follower rank of an
  // instance: follows the leader's messages until it stops.
  WorkerStats run(runtime::DrainController& drain, runtime::Accounting* accounting = nullptr);

 private:
  bool leader() const { return !link_ || link_->leader(); }
  // The first version, loaded on every rank (the leader picks it). False: drained first.
  bool load_first_version(runtime::DrainController& drain);
  // (Leader) the newest version (above `unloadable` when set) once one is announced; nullopt when the
  // worker drains or the run is done first; kTimeout at `first`.
  std::optional<runtime::WeightVersion> wait_first_version(runtime::DrainController& drain, const Deadline& first,
                                                           std::optional<uint64_t> unloadable);
  void stage_loop(runtime::DrainController* drain);
  // A version's weights from the handoff (dir empty) or fetched from the store into scratch
  // (this rank's files only).
  StagedWeights stage(const std::string& location, const std::string& scratch);
  // Between generate() calls: the newest staged version is activated when every rank of the
  // instance has it (one rank: whenever there is one). Also agrees the instance's drain.
  void sync_version(runtime::DrainController& drain);
  // Every rank: one batch of the leader's message, this rank's share generated; the leader
  // gets one entry per unit (nullopt: hand it back).
  std::vector<std::optional<runtime::ExperienceRecord>> run_batch(GroupRollout& gen, const InstanceMessage& m,
                                                                  runtime::DrainController& drain);
  void follow(GroupRollout& gen, runtime::DrainController& drain);  // follower ranks
  // The staged version when it is newer than the active one (an older one is dropped); mu_ held.
  std::optional<StagedWeights> take_newer_staged();
  // Loads staged weights into the policy and makes them the active version.
  void activate(StagedWeights w);
  // Streaming ([rollout] streaming, one rank; rollout/worker_stream.cc): units leased as
  // decode rows free up, records put as groups end, newer versions activated between decode
  // steps. Returns the loop's result.
  runtime::WorkerLoopResult run_stream(GroupRollout& gen, const runtime::WorkerLoopConfig& lc,
                                       runtime::DrainController& drain, runtime::Accounting* accounting);
  class StreamSource;
  friend class StreamSource;
  // Requests the local drain when the instance agreed that some rank drains.
  void agree_drain(bool draining_somewhere, runtime::DrainController& drain);

  WorkerSetup setup_;
  runtime::RuntimeBackends backends_;
  store::ObjectStore& store_;
  WorkerOptions options_;
  std::unique_ptr<model::Model> policy_;
  uint64_t active_version_ = 0;
  WorkerStats stats_;
  std::unique_ptr<InstanceLink> link_;             // several ranks; null: one process
  std::unique_ptr<LockstepGeneration> lockstep_;   // the batch in progress (several ranks)
  TensorFilter wanted_;                            // this rank's tensors of a version (null: all)
  double drain_margin_ = 2;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                         // guarded by mu_
  std::optional<StagedWeights> staged_;       // guarded by mu_
  uint64_t staged_version_ = 0;               // guarded by mu_ (newest fetched)
  uint64_t announced_version_ = 0;            // guarded by mu_ (newest seen in the registry)
  std::thread stager_;
};

}  // namespace moerl::rollout
