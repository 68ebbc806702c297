// RedisTrainerLease against a real redis-server: one holder at a time, the successor of a
// dead holder waits for its lease to run out, a second live trainer is refused naming the
// holder, a frozen holder is fenced once replaced, and a Redis restart does not fence anyone.
#include "runtime/trainer_lease.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "base/error.h"
#include "runtime/redis_client.h"
#include "runtime/redis_queue.h"
#include "runtime/test_records.h"
#include "runtime/weight_registry.h"
#include "runtime/test_redis.h"

namespace moerl::runtime {
namespace {

class TrainerLeaseTest : public RedisTest {
 protected:
  std::unique_ptr<RedisTrainerLease> lease(const std::string& holder, double ttl) {
    return std::make_unique<RedisTrainerLease>(parse_redis_url(url_), "fence", holder, ttl);
  }
};

TEST_F(TrainerLeaseTest, EachAcquisitionGetsTheNextEpochAndACleanExitFreesTheNamespace) {
  auto a = lease("a", 5);
  EXPECT_EQ(a->acquire(Deadline::after_seconds(1)), 1u);
  a->check(Deadline::after_seconds(1));
  a.reset();  // released: the next trainer need not wait
  auto b = lease("b", 5);
  const double t0 = now_seconds();
  EXPECT_EQ(b->acquire(Deadline::after_seconds(3)), 2u);
  EXPECT_LT(now_seconds() - t0, 1.0);
}

TEST_F(TrainerLeaseTest, ASecondLiveTrainerIsRefusedNamingTheHolder) {
  auto a = lease("trainer-pod-0", 0.9);
  a->acquire(Deadline::after_seconds(1));
  auto b = lease("trainer-pod-1", 0.9);
  try {
    b->acquire(Deadline::after_seconds(2.5));  // past a's TTL: a renews, so it is still held
    ADD_FAILURE() << "two trainers hold one namespace";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("held by another live trainer ('1 trainer-pod-0'"), std::string::npos)
        << e.what();
  }
  a->check(Deadline::after_seconds(1));  // the holder is unaffected
}

TEST_F(TrainerLeaseTest, TheSuccessorOfADeadHolderWaitsForItsLeaseAndAFrozenHolderIsFenced) {
  RedisClient raw(parse_redis_url(url_));
  auto a = lease("a", 1.0);
  a->acquire(Deadline::after_seconds(1));
  // a froze past its TTL and a successor took the namespace; the successor then died too
  // (its key, which nobody renews, stands for it).
  raw.command_ok({"SET", "fence:trainer:lease", "9 zombie", "PX", "1000"}, Deadline::after_seconds(1));
  // a's renewal finds another holder: it is fenced.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_THROW(a->check(Deadline::after_seconds(1)), Error);
  auto b = lease("b", 1.0);
  const double t0 = now_seconds();
  EXPECT_EQ(b->acquire(Deadline::after_seconds(3)), 2u);  // after the zombie's key expired
  EXPECT_GT(now_seconds() - t0, 0.3);
  try {
    a->check(Deadline::after_seconds(1));
    ADD_FAILURE() << "the replaced trainer was not fenced";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lost runtime.namespace 'fence' (epoch 1)"), std::string::npos) << e.what();
  }
  b->check(Deadline::after_seconds(1));
}

TEST_F(TrainerLeaseTest, ALeaseThatExpiredInARedisRestartIsTakenBackWhenNoOneClaimedTheNamespace) {
  auto a = lease("a", 1.0);
  a->acquire(Deadline::after_seconds(1));
  server_->kill9();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // longer than the TTL
  server_->restart(Deadline::after_seconds(15));
  a->check(Deadline::after_seconds(5));  // re-taken: epoch 1 is still the newest
  RedisClient raw(parse_redis_url(url_));
  EXPECT_EQ(raw.command_ok({"GET", "fence:trainer:lease"}, Deadline::after_seconds(1)).str, "1 a");
}

// The AsyncFence flake: a trainer frozen inside its batch loop wakes and tops up the task
// queue before it checks its lease. Unfenced, its task landed past the successor's cursor and
// moved the producer cursor, so the successor later skipped that cursor as "already
// enqueued" and dropped the task's record as foreign: the task was never trained.
TEST_F(TrainerLeaseTest, AReplacedTrainersEnqueuesAreRefusedAndTheSuccessorsAreNot) {
  const RedisUrl url = parse_redis_url(url_);
  auto a = lease("a", 0.6);
  RedisTaskQueue a_queue(url, "fence");
  a_queue.set_epoch(a->acquire(Deadline::after_seconds(1)));
  ASSERT_TRUE(a_queue.enqueue_from(make_task("c0", 0), 1, Deadline::after_seconds(1)));
  RedisClient raw(url);
  raw.command_ok({"SET", "fence:trainer:lease", "2 b", "PX", "5000"}, Deadline::after_seconds(1));
  raw.command_ok({"SET", "fence:trainer:epoch", "2"}, Deadline::after_seconds(1));  // b took the namespace
  RedisTaskQueue b_queue(url, "fence");
  b_queue.set_epoch(2);
  for (const bool from_cursor : {true, false}) {
    try {
      if (from_cursor) {
        a_queue.enqueue_from(make_task("c1", 1), 2, Deadline::after_seconds(1));
      } else {
        a_queue.enqueue(make_task("c0", 0, 1), Deadline::after_seconds(1));
      }
      ADD_FAILURE() << "the replaced trainer enqueued (" << (from_cursor ? "enqueue_from" : "enqueue") << ")";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("lost runtime.namespace 'fence' (epoch 1) to a later trainer (epoch 2)"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(b_queue.producer_cursor(Deadline::after_seconds(1)), 1u);
  EXPECT_EQ(b_queue.depth(Deadline::after_seconds(1)).queued(), 1);
  EXPECT_TRUE(b_queue.enqueue_from(make_task("c1", 1), 2, Deadline::after_seconds(1)));
  b_queue.enqueue(make_task("c0", 0, 1), Deadline::after_seconds(1));
  EXPECT_EQ(b_queue.depth(Deadline::after_seconds(1)).queued(), 3);
  // A Redis that lost the counter (a restart) fences no one; the holder's renewal restores it.
  raw.command_ok({"DEL", "fence:trainer:epoch"}, Deadline::after_seconds(1));
  EXPECT_TRUE(b_queue.enqueue_from(make_task("c2", 2), 3, Deadline::after_seconds(1)));
}

// The same frozen trainer, woken between its lease check and a publication: it must not point
// the workers at its weights.
TEST_F(TrainerLeaseTest, AReplacedTrainersPublicationIsRefusedAndTheSuccessorsIsNot) {
  const RedisUrl url = parse_redis_url(url_);
  RedisClient raw(url);
  RedisWeightRegistry a(url, "fence"), b(url, "fence");
  a.set_epoch(1);
  raw.command_ok({"SET", "fence:trainer:epoch", "1"}, Deadline::after_seconds(1));
  a.publish(3, "file:///v3", Deadline::after_seconds(1));
  raw.command_ok({"SET", "fence:trainer:epoch", "2"}, Deadline::after_seconds(1));  // b took the namespace
  b.set_epoch(2);
  try {
    a.publish(4, "file:///old-life/v4", Deadline::after_seconds(1));
    ADD_FAILURE() << "the replaced trainer published";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lost runtime.namespace 'fence' (epoch 1) to a later trainer (epoch 2)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(b.latest(Deadline::after_seconds(1))->version, 3u);
  b.publish(4, "file:///v4", Deadline::after_seconds(1));
  EXPECT_EQ(b.latest(Deadline::after_seconds(1))->location, "file:///v4");
}

}  // namespace
}  // namespace moerl::runtime
