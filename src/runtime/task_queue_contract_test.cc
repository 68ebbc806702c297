// The TaskQueue contract, run over every backend (test_queue_contract.h): lease order and
// depth, waits bounded by the deadline, expiry and takeover, renew, nack, dead-letter,
// idempotent enqueue_from, argument checks, and a multi-threaded exactly-once check.
// Backend-specific behaviour (Redis own-pending recovery, crash) stays in the backend's test.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <set>
#include <thread>

#include "base/error.h"
#include "runtime/test_queue_contract.h"
#include "runtime/test_records.h"

namespace moerl::runtime {
namespace {

Deadline soon() { return Deadline::after_seconds(10); }

TEST_P(TaskQueueContract, LeaseAckInOrder) {
  auto q = backend().queue("t1");
  for (int i = 0; i < 5; ++i) q->enqueue(make_task("t" + std::to_string(i), i), soon());
  auto a = q->lease("w1", 2, 10, soon());
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].task.task_id, "t0");
  EXPECT_EQ(a[1].task.task_id, "t1");
  EXPECT_EQ(a[0].delivery_count, 1u);
  QueueDepth d = q->depth(soon());
  EXPECT_EQ(d.ready, 3);
  EXPECT_EQ(d.leased, 2);
  EXPECT_TRUE(q->ack(a[0], soon()));
  EXPECT_FALSE(q->ack(a[0], soon())) << "second ack of the same lease must report lost";
  EXPECT_TRUE(q->renew(a[1], soon()));
  d = q->depth(soon());
  EXPECT_EQ(d.queued(), 4);
  EXPECT_EQ(d.leased, 1);
  EXPECT_EQ(q->stats().acked, 1);
}

TEST_P(TaskQueueContract, EmptyLeaseWaitsUntilDeadline) {
  auto q = backend().queue("empty");
  double t0 = now_seconds();
  auto got = q->lease("w", 1, 10, Deadline::after_seconds(0.2));
  double waited = now_seconds() - t0;
  EXPECT_TRUE(got.empty());
  EXPECT_GE(waited, 0.19);
  EXPECT_LT(waited, 2.0);
}

TEST_P(TaskQueueContract, LeaseWakesOnEnqueue) {
  auto q = backend().queue("wake");
  std::thread producer([&] {
    auto p = backend().queue("wake");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    p->enqueue(make_task("late", 1), soon());
  });
  double t0 = now_seconds();
  auto got = q->lease("w", 1, 10, Deadline::after_seconds(5));
  producer.join();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].task.task_id, "late");
  EXPECT_LT(now_seconds() - t0, 2.0);
}

TEST_P(TaskQueueContract, ExpiredLeaseIsTakenOverAndRenewKeepsIt) {
  auto q1 = backend().queue("t2");
  auto q2 = backend().queue("t2");
  q1->enqueue(make_task("a", 0), soon());
  q1->enqueue(make_task("b", 1), soon());
  auto l = q1->lease("w1", 2, 1.0, soon());
  ASSERT_EQ(l.size(), 2u);
  // w1 renews "a" but not "b" (as if its thread for b died); w2 must get only "b".
  double t0 = now_seconds();
  std::vector<Lease> taken;
  std::thread renewer([&] {
    for (int i = 0; i < 16; ++i) {
      EXPECT_TRUE(q1->renew(l[0], soon()));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  while (taken.empty() && now_seconds() - t0 < 8) taken = q2->lease("w2", 2, 1.0, Deadline::after_seconds(0.5));
  renewer.join();
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].task.task_id, "b");
  EXPECT_EQ(taken[0].delivery_count, 2u);
  EXPECT_GE(now_seconds() - t0, 0.95) << "taken over before the lease expired";
  EXPECT_FALSE(q1->renew(l[1], soon())) << "a lease taken over must not renew";
  EXPECT_FALSE(q1->ack(l[1], soon())) << "the old holder lost the lease";
  EXPECT_TRUE(q2->ack(taken[0], soon()));
  EXPECT_TRUE(q1->ack(l[0], soon()));
  EXPECT_EQ(q1->depth(soon()).queued(), 0);
  EXPECT_EQ(q2->stats().requeued, 1);
}

TEST_P(TaskQueueContract, ExpiredButNotTakenOverIsStillHeld) {
  auto q = backend().queue("slow");
  q->enqueue(make_task("slow", 0), soon());
  auto l = q->lease("w1", 1, 0.05, soon());
  ASSERT_EQ(l.size(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(q->ack(l[0], soon())) << "nobody took it over, so the slow holder may still ack";
  EXPECT_EQ(q->depth(soon()).queued(), 0);
}

TEST_P(TaskQueueContract, NackHandsBackAtOnceAheadOfNewTasks) {
  auto q = backend().queue("t3");
  q->enqueue(make_task("a", 0), soon());
  q->enqueue(make_task("b", 1), soon());
  auto l = q->lease("w1", 1, 60, soon());
  ASSERT_EQ(l.size(), 1u);
  EXPECT_TRUE(q->nack(l[0], soon()));
  EXPECT_FALSE(q->renew(l[0], soon()));
  EXPECT_FALSE(q->nack(l[0], soon()));
  QueueDepth d = q->depth(soon());
  EXPECT_EQ(d.ready, 2);
  EXPECT_EQ(d.leased, 0);
  double t0 = now_seconds();
  auto again = q->lease("w2", 1, 60, soon());  // lease time 60 s: only a hand-back is this fast
  ASSERT_EQ(again.size(), 1u);
  EXPECT_LT(now_seconds() - t0, 1.0);
  EXPECT_EQ(again[0].task.task_id, "a");
  EXPECT_EQ(again[0].worker, "w2");
  EXPECT_EQ(again[0].delivery_count, 2u);
  EXPECT_TRUE(q->ack(again[0], soon()));
}

TEST_P(TaskQueueContract, DeadLetterAfterMaxDeliveries) {
  auto q = backend().open_queue("t4", QueueOptions{.max_deliveries = 3});
  q->enqueue(make_task("poison", 0), soon());
  q->enqueue(make_task("fine", 1), soon());
  for (int i = 0; i < 3; ++i) {
    auto l = q->lease("w", 1, 60, soon());
    ASSERT_EQ(l.size(), 1u);
    EXPECT_EQ(l[0].task.task_id, "poison");
    EXPECT_EQ(l[0].delivery_count, static_cast<uint32_t>(i + 1));
    EXPECT_TRUE(q->nack(l[0], soon()));
  }
  auto l = q->lease("w", 1, 60, soon());
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].task.task_id, "fine");
  auto dead = q->dead_letters(soon());
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].task_id, "poison");
  QueueDepth d = q->depth(soon());
  EXPECT_EQ(d.dead, 1);
  EXPECT_EQ(d.queued(), 1);
  EXPECT_EQ(q->stats().dead_lettered, 1);
}

TEST_P(TaskQueueContract, EnqueueFromIsIdempotent) {
  auto q = backend().queue("idem");
  auto task_at = [](uint64_t cursor) { return make_task("q" + std::to_string(cursor), cursor); };
  EXPECT_EQ(q->producer_cursor(soon()), 0u);
  EXPECT_TRUE(q->enqueue_from(task_at(0), 1, soon()));
  EXPECT_FALSE(q->enqueue_from(task_at(0), 1, soon()));
  EXPECT_TRUE(q->enqueue_from(task_at(1), 2, soon()));
  EXPECT_EQ(q->producer_cursor(soon()), 2u);
  EXPECT_EQ(q->depth(soon()).ready, 2);
}

TEST_P(TaskQueueContract, RejectsBadArguments) {
  auto q = backend().queue("bad");
  q->enqueue(make_task("a", 0), soon());
  EXPECT_THROW(q->lease("", 1, 1, soon()), Error);
  EXPECT_THROW(q->lease("w", 0, 1, soon()), Error);
  Lease bogus{"nonsense", "w", 1, 1, {}};
  EXPECT_THROW(q->ack(bogus, soon()), Error);
  EXPECT_THROW(backend().open_queue("bad-options", QueueOptions{.max_deliveries = 0}), Error);
}

// Four workers race over 400 tasks, each randomly abandoning (expiry) or nacking some;
// the consumer must see every task exactly once after dedupe.
TEST_P(TaskQueueContract, ThreadedExactlyOnceWithAbandonedLeases) {
  const int kTasks = 400;
  {
    auto producer = backend().open_queue("c", QueueOptions{.max_deliveries = 100});
    for (int i = 0; i < kTasks; ++i) producer->enqueue(make_task("c" + std::to_string(i), i), soon());
  }
  auto b = backend().buffer("c");
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      auto q = backend().open_queue("c", QueueOptions{.max_deliveries = 100});
      auto out = backend().buffer("c");
      std::mt19937 rng(100 + w);
      std::string name = "w" + std::to_string(w);
      while (!stop.load()) {
        auto leases = q->lease(name, 2, 0.05, Deadline::after_seconds(0.05));
        for (Lease& l : leases) {
          int fate = rng() % 10;
          if (fate == 0) continue;                          // abandon: lease expires
          if (fate == 1) { q->nack(l, soon()); continue; }  // hand back
          out->put(record_for(l.task, name, 0), soon());
          if (fate == 2) continue;                          // crash after put, before ack
          q->ack(l, soon());
        }
      }
    });
  }
  std::set<std::string> seen;
  Deadline end = Deadline::after_seconds(60);
  while (static_cast<int>(seen.size()) < kTasks && !end.expired()) {
    for (auto& r : b->take(32, Deadline::after_seconds(0.1))) {
      EXPECT_TRUE(seen.insert(r.task_id).second) << "trained twice: " << r.task_id;
    }
  }
  stop = true;
  for (auto& t : workers) t.join();
  EXPECT_EQ(static_cast<int>(seen.size()), kTasks);
  EXPECT_GT(b->stats().duplicates_dropped, 0);
}

}  // namespace
}  // namespace moerl::runtime
