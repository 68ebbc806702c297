// QueueSource: the async job's experience. Rollout workers (other threads, processes or pods)
// lease prompt groups from the task queue and put scored records into the experience buffer;
// this source, on the trainer, keeps the queue topped up (runtime::AsyncController), takes
// each step's records within runtime.max_staleness, publishes weight version v+1 after every
// step due under runtime.publish_every (rollout::VersionPublisher), appends what it trained to
// trained.jsonl, and carries the buffer snapshot, data cursor and version lineage in the
// trainer's checkpoints, so a restarted trainer trains no task twice. Over Redis it first takes
// the namespace's trainer lease (runtime/trainer_lease.h) and checks it before every batch,
// publication and checkpoint; records of versions outside its lineage (runtime/lineage.h) are
// dropped and their tasks enqueued again, so a restart before the first checkpoint re-reads
// the experience stream from its start and loses nothing. With --fresh (JobOptions::fresh) and
// no checkpoint to resume, it first removes the earlier run's state from the namespace
// (runtime/namespace_reset.h).
//
//   QueueSource src(ctx, {.backends = runtime::open_backends(cfg.runtime)});
//   run_trainer_loop(ctx, src);      // `moerl trainer`
// A trainer group (ep.size ranks under `moerl launch`) is ONE consumer: rank 0 alone holds
// the lease, the controller, the lineage and trained.jsonl, takes each step's batch (a
// multiple of the group's size: a short batch waits for more, and only the run's last
// remainder, fewer records than ranks, goes untrained as surplus) and scatters it, record i
// to rank i mod R; publication is collective (each rank writes its shard of the version).
// Rank 0's failures reach every rank as moerl::Error (ep::ControlGroup::lead_runs). Not
// thread-safe: the trainer thread drives it; the backends are shared.
#pragma once

#include <fstream>
#include <functional>
#include <memory>
#include <optional>

#include "job/experience_source.h"
#include "job/run_context.h"
#include "rollout/weight_handoff.h"
#include "rollout/weight_publisher.h"
#include "runtime/accounting.h"
#include "runtime/controller.h"
#include "runtime/lineage.h"
#include "runtime/runtime_config.h"
#include "runtime/trainer_lease.h"

namespace moerl::job {

struct QueueSourceOptions {
  runtime::RuntimeBackends backends;
  // Set when every worker is a thread of this process: versions pass in memory.
  std::shared_ptr<rollout::WeightHandoff> handoff;
  // Runs once the run is over, before the accounting report (the local launcher stops its
  // worker threads there, so their times are counted). May be empty.
  std::function<void()> before_report;
  // Asked while a batch is awaited; throws when no worker can produce any more (the local
  // launcher: every worker thread has stopped with an error), so the trainer stops with that
  // error instead of waiting. May be empty.
  std::function<void()> check_producers;
};

class QueueSource final : public ExperienceSource {
 public:
  QueueSource(RunContext& ctx, QueueSourceOptions options);
  const char* mode() const override { return "async"; }
  void start() override;
  StepExperience next_batch() override;
  void after_step(StepExperience& step) override;
  nlohmann::json snapshot() override;
  void checkpoint_committed() override;
  void finish() override;
  void add_summary(nlohmann::json& summary) override;
  std::vector<std::string> plot_panels() const override { return {"staleness_mean", "trainer_idle_fraction"}; }

 private:
  Deadline call_deadline() const;

  void check_lease();  // throws once another trainer took the namespace
  bool lead() const { return ctx_.lead(); }
  // Runs `fn` on rank 0 (with a beat, for work of unbounded length); its failure reaches
  // every rank of a trainer group.
  void on_lead(const std::string& what, const std::function<void(const ep::ControlGroup::Beat&)>& fn);
  void start_lead();            // lease, lineage, controller, restore (rank 0)
  // [runtime] weight_transport = "shared" for worker processes: the writer; else null.
  std::shared_ptr<rollout::SharedWeightsWriter> shared_weights_writer() const;
  // The whole step's records (rank 0); `beat` (may be empty) is called at least every
  // kBeatSeconds while it waits, so a trainer group's other ranks wait it out.
  StepExperience take_batch(const ep::ControlGroup::Beat& beat);
  void finish_lead(const ep::ControlGroup::Beat& beat);
  // Rank 0's batch split over the ranks: each returns its share (record i to rank i mod R).
  std::vector<runtime::ExperienceRecord> scatter_batch(const std::vector<runtime::ExperienceRecord>& batch);
  // --fresh (lease held): removes the earlier run's state from runtime.namespace, unless a
  // checkpoint was resumed after all.
  void reset_namespace();

  RunContext& ctx_;
  QueueSourceOptions o_;
  std::unique_ptr<runtime::TrainerLease> lease_;  // nullptr in-process; released last
  runtime::VersionLineage lineage_;
  runtime::Accounting acc_;
  uint64_t first_cursor_ = 0;  // data cursor of the first RL task
  std::unique_ptr<runtime::AsyncController> ctl_;
  std::unique_ptr<rollout::VersionPublisher> publisher_;
  std::optional<runtime::BufferSnapshot> pending_;  // in the checkpoint being written
  // The previous committed checkpoint's snapshot: the stream is trimmed only up to it, so a
  // resume that falls back from a damaged newest checkpoint still finds its records.
  std::optional<runtime::BufferSnapshot> committed_before_;
  std::ofstream trained_;                           // trained.jsonl
  std::vector<runtime::ExperienceRecord> batch_;    // rank 0: the step's whole batch (every rank's share)
  int64_t surplus_ = 0;                             // records left untrained at the run's end (several ranks)
};

}  // namespace moerl::job
