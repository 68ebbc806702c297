// InProcessTaskQueue / InProcessExperienceBuffer: lease, renew, ack, expiry, nack,
// dead-letter, dedupe, snapshot/restore, and a multi-threaded exactly-once check.
#include "runtime/in_process_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "base/error.h"
#include "runtime/staleness.h"
#include "runtime/test_records.h"

namespace moerl::runtime {
namespace {

Deadline soon() { return Deadline::after_seconds(5); }

TEST(InProcessQueue, LeaseAckInOrder) {
  InProcessTaskQueue q;
  for (int i = 0; i < 5; ++i) q.enqueue(make_task("t" + std::to_string(i), i), soon());
  auto a = q.lease("w1", 2, 10, soon());
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].task.task_id, "t0");
  EXPECT_EQ(a[1].task.task_id, "t1");
  EXPECT_EQ(a[0].delivery_count, 1u);
  QueueDepth d = q.depth(soon());
  EXPECT_EQ(d.ready, 3);
  EXPECT_EQ(d.leased, 2);
  EXPECT_TRUE(q.ack(a[0], soon()));
  EXPECT_FALSE(q.ack(a[0], soon())) << "second ack of the same lease must report lost";
  EXPECT_EQ(q.depth(soon()).queued(), 4);
  EXPECT_EQ(q.stats().acked, 1);
}

TEST(InProcessQueue, EmptyLeaseWaitsUntilDeadline) {
  InProcessTaskQueue q;
  double t0 = now_seconds();
  auto got = q.lease("w", 1, 10, Deadline::after_seconds(0.2));
  double waited = now_seconds() - t0;
  EXPECT_TRUE(got.empty());
  EXPECT_GE(waited, 0.19);
  EXPECT_LT(waited, 2.0);
}

TEST(InProcessQueue, LeaseWakesOnEnqueue) {
  InProcessTaskQueue q;
  std::thread producer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    q.enqueue(make_task("late", 1), soon());
  });
  double t0 = now_seconds();
  auto got = q.lease("w", 1, 10, Deadline::after_seconds(5));
  producer.join();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].task.task_id, "late");
  EXPECT_LT(now_seconds() - t0, 2.0);
}

TEST(InProcessQueue, ExpiredLeaseIsRedeliveredAndRenewKeepsIt) {
  InProcessTaskQueue q;
  q.enqueue(make_task("a", 0), soon());
  q.enqueue(make_task("b", 1), soon());
  auto l = q.lease("w1", 2, 0.3, soon());
  ASSERT_EQ(l.size(), 2u);
  // Renew "a" while "b" lapses.
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(120));
    EXPECT_TRUE(q.renew(l[0], soon()));
  }
  auto taken = q.lease("w2", 2, 10, Deadline::after_seconds(1));
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].task.task_id, "b");
  EXPECT_EQ(taken[0].delivery_count, 2u);
  EXPECT_FALSE(q.renew(l[1], soon())) << "a lease taken over must not renew";
  EXPECT_FALSE(q.ack(l[1], soon())) << "the old holder lost the lease";
  EXPECT_TRUE(q.ack(taken[0], soon()));
  EXPECT_TRUE(q.ack(l[0], soon()));
  EXPECT_EQ(q.depth(soon()).queued(), 0);
  EXPECT_EQ(q.stats().requeued, 1);
}

TEST(InProcessQueue, ExpiredButNotTakenOverIsStillHeld) {
  InProcessTaskQueue q;
  q.enqueue(make_task("slow", 0), soon());
  auto l = q.lease("w1", 1, 0.05, soon());
  ASSERT_EQ(l.size(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(q.ack(l[0], soon())) << "nobody took it over, so the slow holder may still ack";
  EXPECT_EQ(q.depth(soon()).queued(), 0);
}

TEST(InProcessQueue, NackHandsBackAtOnceAheadOfNewTasks) {
  InProcessTaskQueue q;
  q.enqueue(make_task("a", 0), soon());
  q.enqueue(make_task("b", 1), soon());
  auto l = q.lease("w1", 1, 60, soon());
  ASSERT_EQ(l.size(), 1u);
  EXPECT_TRUE(q.nack(l[0], soon()));
  EXPECT_FALSE(q.renew(l[0], soon()));
  EXPECT_FALSE(q.nack(l[0], soon()));
  auto again = q.lease("w2", 1, 60, Deadline::after_seconds(0.5));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].task.task_id, "a");
  EXPECT_EQ(again[0].worker, "w2");
}

TEST(InProcessQueue, DeadLetterAfterMaxDeliveries) {
  InProcessTaskQueue q(QueueOptions{.max_deliveries = 3});
  q.enqueue(make_task("poison", 0), soon());
  q.enqueue(make_task("fine", 1), soon());
  for (int i = 0; i < 3; ++i) {
    auto l = q.lease("w", 1, 60, soon());
    ASSERT_EQ(l.size(), 1u);
    EXPECT_EQ(l[0].task.task_id, "poison");
    EXPECT_EQ(l[0].delivery_count, static_cast<uint32_t>(i + 1));
    EXPECT_TRUE(q.nack(l[0], soon()));
  }
  auto l = q.lease("w", 1, 60, soon());
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].task.task_id, "fine");
  auto dead = q.dead_letters(soon());
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].task_id, "poison");
  EXPECT_EQ(q.depth(soon()).dead, 1);
}

TEST(InProcessQueue, RejectsBadArguments) {
  InProcessTaskQueue q;
  EXPECT_THROW(q.lease("", 1, 1, soon()), Error);
  EXPECT_THROW(q.lease("w", 0, 1, soon()), Error);
  Lease bogus{"nonsense", "w", 1, 1, {}};
  EXPECT_THROW(q.ack(bogus, soon()), Error);
  EXPECT_THROW(InProcessTaskQueue(QueueOptions{.max_deliveries = 0}), Error);
}

TEST(InProcessBuffer, DedupeByTaskAndAttempt) {
  InProcessExperienceBuffer b;
  TaskUnit t = make_task("x", 3);
  b.put(record_for(t, "w1", 1), soon());
  b.put(record_for(t, "w2", 1), soon());  // redelivered task, same attempt
  TaskUnit t2 = make_task("x", 3, /*attempt=*/1);
  b.put(record_for(t2, "w1", 2), soon());  // regenerated: new attempt is kept
  auto got = b.take(3, Deadline::after_seconds(0.2));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].worker_id, "w1");
  EXPECT_EQ(got[1].attempt, 1u);
  EXPECT_EQ(b.stats().duplicates_dropped, 1);
  EXPECT_EQ(b.stats().taken, 2);
  b.put(record_for(t, "w3", 1), soon());  // late duplicate after take
  EXPECT_TRUE(b.take(1, Deadline::after_seconds(0.1)).empty());
  EXPECT_EQ(b.stats().duplicates_dropped, 2);
}

TEST(InProcessBuffer, TakeWaitsForProducers) {
  InProcessExperienceBuffer b;
  std::thread producer([&] {
    for (int i = 0; i < 4; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      b.put(record_for(make_task("p" + std::to_string(i), i), "w", 0), soon());
    }
  });
  auto got = b.take(4, Deadline::after_seconds(5));
  producer.join();
  EXPECT_EQ(got.size(), 4u);
}

TEST(InProcessBuffer, SnapshotRestoreKeepsPendingUngotAndSeen) {
  InProcessExperienceBuffer b;
  for (int i = 0; i < 5; ++i) b.put(record_for(make_task("s" + std::to_string(i), i), "w", 0), soon());
  auto first = b.take(2, soon());
  ASSERT_EQ(first.size(), 2u);
  b.unget({first[1]});
  BufferSnapshot snap = BufferSnapshot::decode(b.snapshot().encode());
  EXPECT_EQ(snap.pending.size(), 3u);
  EXPECT_EQ(snap.ungot.size(), 1u);

  InProcessExperienceBuffer restored;
  restored.restore(snap, soon());
  // A duplicate of an already-trained record arriving after restart is still dropped.
  restored.put(record_for(make_task("s0", 0), "w9", 0), soon());
  auto rest = restored.take(10, Deadline::after_seconds(0.2));
  std::vector<std::string> ids;
  for (auto& r : rest) ids.push_back(r.task_id);
  EXPECT_EQ(ids, (std::vector<std::string>{"s1", "s2", "s3", "s4"}));
  EXPECT_EQ(restored.stats().duplicates_dropped, 1);
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

// Four workers race over 400 tasks, each randomly abandoning (expiry) or nacking some;
// the consumer must see every task exactly once after dedupe.
TEST(InProcessQueue, ThreadedExactlyOnceWithAbandonedLeases) {
  InProcessTaskQueue q(QueueOptions{.max_deliveries = 100});
  InProcessExperienceBuffer b;
  const int kTasks = 400;
  for (int i = 0; i < kTasks; ++i) q.enqueue(make_task("c" + std::to_string(i), i), soon());
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      std::mt19937 rng(100 + w);
      std::string name = "w" + std::to_string(w);
      while (!stop.load()) {
        auto leases = q.lease(name, 2, 0.05, Deadline::after_seconds(0.05));
        for (Lease& l : leases) {
          int fate = rng() % 10;
          if (fate == 0) continue;                       // abandon: lease expires
          if (fate == 1) { q.nack(l, soon()); continue; }  // hand back
          b.put(record_for(l.task, name, 0), soon());
          if (fate == 2) continue;                       // crash after put, before ack
          q.ack(l, soon());
        }
      }
    });
  }
  std::set<std::string> seen;
  Deadline end = Deadline::after_seconds(60);
  while (static_cast<int>(seen.size()) < kTasks && !end.expired()) {
    for (auto& r : b.take(32, Deadline::after_seconds(0.1))) {
      EXPECT_TRUE(seen.insert(r.task_id).second) << "trained twice: " << r.task_id;
    }
  }
  stop = true;
  for (auto& t : workers) t.join();
  EXPECT_EQ(static_cast<int>(seen.size()), kTasks);
  EXPECT_GT(b.stats().duplicates_dropped, 0);
}

}  // namespace
}  // namespace moerl::runtime
