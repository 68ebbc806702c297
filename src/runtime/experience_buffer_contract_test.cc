// The ExperienceBuffer and WeightRegistry contracts, run over every backend
// (test_queue_contract.h): dedupe by (task_id, attempt), take waiting for producers, a
// trainer restart from a checkpoint that neither repeats nor skips a record, and weight
// versions published, read and waited for.
#include <gtest/gtest.h>

#include <thread>

#include "base/error.h"
#include "runtime/test_queue_contract.h"
#include "runtime/test_records.h"

namespace moerl::runtime {
namespace {

Deadline soon() { return Deadline::after_seconds(10); }

std::vector<std::string> ids_of(const std::vector<ExperienceRecord>& records) {
  std::vector<std::string> ids;
  for (const ExperienceRecord& r : records) ids.push_back(r.task_id);
  return ids;
}

TEST_P(ExperienceBufferContract, DedupeByTaskAndAttempt) {
  auto b = backend().buffer("d");
  TaskUnit t = make_task("x", 3);
  b->put(record_for(t, "w1", 1), soon());
  b->put(record_for(t, "w2", 1), soon());  // redelivered task, same attempt
  TaskUnit t2 = make_task("x", 3, /*attempt=*/1);
  b->put(record_for(t2, "w1", 2), soon());  // regenerated: new attempt is kept
  auto got = b->take(3, Deadline::after_seconds(0.2));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].worker_id, "w1");
  EXPECT_EQ(got[1].attempt, 1u);
  EXPECT_EQ(b->stats().duplicates_dropped, 1);
  EXPECT_EQ(b->stats().taken, 2);
  b->put(record_for(t, "w3", 1), soon());  // late duplicate after take
  EXPECT_TRUE(b->take(1, Deadline::after_seconds(0.1)).empty());
  EXPECT_EQ(b->stats().duplicates_dropped, 2);
}

TEST_P(ExperienceBufferContract, TakeWaitsForProducers) {
  auto b = backend().buffer("p");
  std::thread producer([&] {
    auto out = backend().buffer("p");
    for (int i = 0; i < 4; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      out->put(record_for(make_task("p" + std::to_string(i), i), "w", 0), soon());
    }
  });
  auto got = b->take(4, Deadline::after_seconds(5));
  producer.join();
  EXPECT_EQ(got.size(), 4u);
}

// The trainer checkpoints with one record handed back, trains more, and dies; restored from
// the checkpoint it gets exactly the records it had not trained at the checkpoint, and
// duplicates (one put before the checkpoint, one after the restart) are still dropped.
TEST_P(ExperienceBufferContract, SnapshotRestoreResumesWithoutDuplicatesOrLoss) {
  std::vector<TaskUnit> tasks;
  for (int i = 0; i < 6; ++i) tasks.push_back(make_task("e" + std::to_string(i), i));
  {
    auto worker = backend().buffer("t6");
    for (auto& t : tasks) worker->put(record_for(t, "w1", 1), soon());
    worker->put(record_for(tasks[1], "w2", 1), soon());  // duplicate from a redelivery
  }
  BufferSnapshot checkpoint;
  {
    auto trainer = backend().buffer("t6");
    auto first = trainer->take(3, soon());
    ASSERT_EQ(first.size(), 3u);
    EXPECT_EQ(first[2].task_id, "e2");
    trainer->unget({first[2]});  // did not fit in the step
    checkpoint = BufferSnapshot::decode(trainer->snapshot().encode());
    EXPECT_EQ(checkpoint.ungot.size(), 1u);
    auto after = trainer->take(3, soon());  // trained after the checkpoint, then the trainer dies
    ASSERT_EQ(after.size(), 3u);
    EXPECT_EQ(after[0].task_id, "e2");
  }
  backend().kill_trainer("t6");
  auto restarted = backend().buffer("t6");
  restarted->restore(checkpoint, soon());
  backend().buffer("t6")->put(record_for(tasks[0], "w3", 1), soon());  // late duplicate of a trained record
  auto rest = restarted->take(10, Deadline::after_seconds(1));
  EXPECT_EQ(ids_of(rest), (std::vector<std::string>{"e2", "e3", "e4", "e5"}));
  EXPECT_EQ(restarted->stats().duplicates_dropped, 2);
}

TEST_P(WeightRegistryContract, PublishLatestWait) {
  auto trainer = backend().weights("t8");
  auto worker = backend().weights("t8");
  EXPECT_FALSE(worker->latest(soon()).has_value());
  EXPECT_FALSE(worker->wait_newer(0, Deadline::after_seconds(0.2)).has_value());
  trainer->publish(3, "s3://b/job/v3/manifest.json", soon());
  auto l = worker->latest(soon());
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->version, 3u);
  EXPECT_EQ(l->location, "s3://b/job/v3/manifest.json");
  EXPECT_GT(l->published_unix_ms, 0);
  std::thread pub([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    trainer->publish(4, "s3://b/job/v4/manifest.json", soon());
  });
  double t0 = now_seconds();
  auto v = worker->wait_newer(3, soon());
  pub.join();
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->version, 4u);
  EXPECT_EQ(v->location, "s3://b/job/v4/manifest.json");
  EXPECT_LT(now_seconds() - t0, 2.0);
  trainer->publish(4, "s3://b/job/v4/manifest.json", soon());  // retry of the same publish is fine
  EXPECT_THROW(trainer->publish(4, "s3://elsewhere", soon()), Error);
  EXPECT_THROW(trainer->publish(3, "s3://b/job/v3/manifest.json", soon()), Error);
  EXPECT_THROW(trainer->publish(2, "s3://b/job/v2", soon()), Error);
}

}  // namespace
}  // namespace moerl::runtime
