// The in-process backends: InProcessTaskQueue / InProcessExperienceBuffer /
// InProcessWeightRegistry run the shared contracts (test_queue_contract.h); what is
// in-process only (the snapshot holds every record not yet taken), StaleFilter, Accounting.
#include "runtime/in_process_queue.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "base/error.h"
#include "runtime/staleness.h"
#include "runtime/test_queue_contract.h"
#include "runtime/test_records.h"

namespace moerl::runtime {
namespace {

Deadline soon() { return Deadline::after_seconds(5); }

// One process: every open of a name returns the same object.
class InProcessBackend : public QueueBackend {
 public:
  std::shared_ptr<TaskQueue> open_queue(const std::string& ns, QueueOptions options) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto& q = queues_[ns];
    if (!q) q = std::make_shared<InProcessTaskQueue>(options);
    return q;
  }
  std::shared_ptr<ExperienceBuffer> buffer(const std::string& ns) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto& b = buffers_[ns];
    if (!b) b = std::make_shared<InProcessExperienceBuffer>();
    return b;
  }
  std::shared_ptr<WeightRegistry> weights(const std::string& ns) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto& w = weights_[ns];
    if (!w) w = std::make_shared<InProcessWeightRegistry>();
    return w;
  }
  void kill_trainer(const std::string& ns) override {
    std::lock_guard<std::mutex> lock(mu_);
    buffers_.erase(ns);
  }

 private:
  std::mutex mu_;  // tests open clients from worker threads; guards the maps
  std::map<std::string, std::shared_ptr<TaskQueue>> queues_;
  std::map<std::string, std::shared_ptr<ExperienceBuffer>> buffers_;
  std::map<std::string, std::shared_ptr<WeightRegistry>> weights_;
};

const QueueBackendFactory kInProcess{"InProcess", [] { return std::make_unique<InProcessBackend>(); }};
INSTANTIATE_TEST_SUITE_P(InProcess, TaskQueueContract, ::testing::Values(kInProcess));
INSTANTIATE_TEST_SUITE_P(InProcess, ExperienceBufferContract, ::testing::Values(kInProcess));
INSTANTIATE_TEST_SUITE_P(InProcess, WeightRegistryContract, ::testing::Values(kInProcess));

// In-process state lives only in the snapshot: it carries every record not yet taken.
TEST(InProcessBuffer, SnapshotHoldsPendingAndUngot) {
  InProcessExperienceBuffer b;
  for (int i = 0; i < 5; ++i) b.put(record_for(make_task("s" + std::to_string(i), i), "w", 0), soon());
  auto first = b.take(2, soon());
  ASSERT_EQ(first.size(), 2u);
  b.unget({first[1]});
  BufferSnapshot snap = BufferSnapshot::decode(b.snapshot().encode());
  EXPECT_EQ(snap.pending.size(), 3u);
  EXPECT_EQ(snap.ungot.size(), 1u);
}

TEST(StaleFilter, SplitsAndCounts) {
  Accounting acc;
  std::vector<ExperienceRecord> batch;
  for (uint64_t v : {10u, 9u, 7u, 6u}) batch.push_back(record_for(make_task("v" + std::to_string(v), v), "w", v));
  StaleFilter drop{.max_staleness = 2, .policy = StalePolicy::kDrop};
  StaleSplit s = drop.apply(batch, 10, &acc);
  EXPECT_EQ(s.keep.size(), 2u);
  EXPECT_EQ(s.stale.size(), 2u);
  EXPECT_EQ(acc.get(Counter::kStaleDropped), 2);
  EXPECT_EQ(acc.get(Counter::kTasksCompleted), 4);
  StaleFilter regen{.max_staleness = 3, .policy = StalePolicy::kRegenerate};
  StaleSplit s2 = regen.apply(batch, 10, &acc);
  EXPECT_EQ(s2.stale.size(), 1u);
  EXPECT_EQ(s2.stale[0].task_id, "v6");
  EXPECT_EQ(acc.get(Counter::kTasksRequeued), 1);
  AccountingReport rep = acc.report(0);
  EXPECT_EQ(rep.staleness_histogram.at(0), 2);
  EXPECT_EQ(rep.staleness_histogram.at(4), 2);
  nlohmann::json j = rep.to_json();
  EXPECT_EQ(j["stale_dropped"], 3);
  EXPECT_EQ(j["staleness_histogram"]["3"], 2);
  EXPECT_THROW(parse_stale_policy("sometimes"), Error);
}

TEST(Accounting, LostAndIdleFractions) {
  Accounting acc;
  acc.add(Counter::kTasksCreated, 10);
  acc.add(Counter::kTasksCompleted, 7);
  acc.add(Counter::kDeadLettered, 1);
  acc.add(Counter::kSamplesTrained, 56);
  acc.add_role_time(Role::kTrainer, 6.0, 2.0);
  acc.add_role_time(Role::kRollout, 3.0, 1.0);
  AccountingReport r = acc.report(/*still_queued=*/2);
  EXPECT_EQ(r.lost, 0);
  EXPECT_DOUBLE_EQ(r.trainer_idle_fraction, 0.25);
  EXPECT_DOUBLE_EQ(r.rollout_idle_fraction, 0.25);
  EXPECT_DOUBLE_EQ(r.trainer_samples_per_second, 7.0);
  EXPECT_EQ(acc.report(1).lost, 1);
  EXPECT_EQ(r.to_json()["lost"], 0);
}

}  // namespace
}  // namespace moerl::runtime
