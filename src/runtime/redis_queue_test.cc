// Redis Streams backends against a real redis-server started by the test: lease / renew /
// ack / nack / expiry / dead-letter, XAUTOCLAIM takeover, own-pending recovery, trainer
// dedupe and checkpoint rewind, a Redis crash mid-run, and the weight registry.
#include "runtime/redis_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "base/error.h"
#include "base/files.h"
#include "runtime/test_records.h"
#include "runtime/test_redis.h"
#include "runtime/weight_registry.h"

namespace moerl::runtime {
namespace {

Deadline soon() { return Deadline::after_seconds(10); }

TEST(RedisUrl, Parses) {
  RedisUrl u = parse_redis_url("redis://:s3cret@10.0.0.5:6380/3");
  EXPECT_EQ(u.host, "10.0.0.5");
  EXPECT_EQ(u.port, 6380);
  EXPECT_EQ(u.password, "s3cret");
  EXPECT_EQ(u.db, 3);
  EXPECT_EQ(u.to_string(), "redis://:***@10.0.0.5:6380/3");
  RedisUrl d = parse_redis_url("redis://localhost");
  EXPECT_EQ(d.port, 6379);
  EXPECT_EQ(d.db, 0);
  EXPECT_EQ(parse_redis_url("redis://user:pw@h:1/0").password, "pw");
  EXPECT_THROW(parse_redis_url("http://h:1"), Error);
  EXPECT_THROW(parse_redis_url("redis://h:99999"), Error);
  EXPECT_THROW(parse_redis_url("redis://h:1/x"), Error);
  EXPECT_THROW(parse_redis_url("redis://:1"), Error);
}

TEST(RedisClientTest, UnreachableServerTimesOutWithHint) {
  RedisClient c(parse_redis_url("redis://127.0.0.1:" + std::to_string(pick_free_loopback_port())));
  double t0 = now_seconds();
  try {
    c.command({"PING"}, Deadline::after_seconds(0.3));
    FAIL() << "PING to a closed port succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
    EXPECT_NE(std::string(e.what()).find("PING got no answer"), std::string::npos) << e.what();
  }
  EXPECT_LT(now_seconds() - t0, 2.0);
}

class RedisQueueTest : public RedisTest {};

TEST_F(RedisQueueTest, PasswordAndDb) {
  char tmpl[] = "/tmp/moerl-runtime-redis-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  RedisServer s = RedisServer::start(dir, soon(), 0, "pw1");
  RedisTaskQueue q(parse_redis_url(s.url(2)), "auth");
  q.enqueue(make_task("a", 0), soon());
  EXPECT_EQ(q.depth(soon()).ready, 1);
  RedisClient bad(parse_redis_url("redis://127.0.0.1:" + std::to_string(s.port())));
  EXPECT_TRUE(bad.command({"XLEN", "auth:tasks"}, soon()).is_error());  // NOAUTH
  s.stop();
  remove_tree(dir);
}

TEST_F(RedisQueueTest, LeaseAckDepth) {
  RedisTaskQueue q(parse_redis_url(url_), "t1");
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
  EXPECT_FALSE(q.ack(a[0], soon()));
  EXPECT_TRUE(q.renew(a[1], soon()));
  d = q.depth(soon());
  EXPECT_EQ(d.queued(), 4);
  EXPECT_EQ(d.leased, 1);
  auto none = RedisTaskQueue(parse_redis_url(url_), "empty").lease("w", 1, 10, Deadline::after_seconds(0.3));
  EXPECT_TRUE(none.empty());
}

TEST_F(RedisQueueTest, RenewKeepsLeaseAndExpiredOneIsTakenOver) {
  RedisTaskQueue q1(parse_redis_url(url_), "t2");
  RedisTaskQueue q2(parse_redis_url(url_), "t2");
  q1.enqueue(make_task("a", 0), soon());
  q1.enqueue(make_task("b", 1), soon());
  auto l = q1.lease("w1", 2, 1.0, soon());
  ASSERT_EQ(l.size(), 2u);
  // w1 renews "a" but not "b" (as if its thread for b died); w2 must get only "b".
  double t0 = now_seconds();
  std::vector<Lease> taken;
  std::thread renewer([&] {
    for (int i = 0; i < 16; ++i) {
      EXPECT_TRUE(q1.renew(l[0], soon()));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  while (taken.empty() && now_seconds() - t0 < 8) taken = q2.lease("w2", 2, 1.0, Deadline::after_seconds(0.5));
  renewer.join();
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].task.task_id, "b");
  EXPECT_EQ(taken[0].delivery_count, 2u);
  EXPECT_GE(now_seconds() - t0, 0.95) << "taken over before the lease expired";
  EXPECT_FALSE(q1.renew(l[1], soon())) << "old holder must see the lease as lost";
  EXPECT_FALSE(q1.ack(l[1], soon()));
  EXPECT_TRUE(q2.ack(taken[0], soon()));
  EXPECT_TRUE(q1.ack(l[0], soon()));
  EXPECT_EQ(q1.depth(soon()).queued(), 0);
  EXPECT_EQ(q2.stats().requeued, 1);
}

TEST_F(RedisQueueTest, NackHandsBackAtOnce) {
  RedisTaskQueue q(parse_redis_url(url_), "t3");
  q.enqueue(make_task("a", 0), soon());
  auto l = q.lease("w1", 1, 60, soon());
  ASSERT_EQ(l.size(), 1u);
  EXPECT_TRUE(q.nack(l[0], soon()));
  EXPECT_FALSE(q.renew(l[0], soon()));
  QueueDepth d = q.depth(soon());
  EXPECT_EQ(d.ready, 1);
  EXPECT_EQ(d.leased, 0);
  double t0 = now_seconds();
  auto again = q.lease("w2", 1, 60, soon());  // lease time 60 s: only a hand-back is this fast
  ASSERT_EQ(again.size(), 1u);
  EXPECT_LT(now_seconds() - t0, 1.0);
  EXPECT_EQ(again[0].task.task_id, "a");
  EXPECT_EQ(again[0].delivery_count, 2u);
  EXPECT_TRUE(q.ack(again[0], soon()));
}

TEST_F(RedisQueueTest, DeadLetterAfterMaxDeliveries) {
  RedisTaskQueue q(parse_redis_url(url_), "t4", QueueOptions{.max_deliveries = 3});
  q.enqueue(make_task("poison", 0), soon());
  for (int i = 0; i < 3; ++i) {
    auto l = q.lease("w", 1, 60, soon());
    ASSERT_EQ(l.size(), 1u);
    EXPECT_EQ(l[0].delivery_count, static_cast<uint32_t>(i + 1));
    EXPECT_TRUE(q.nack(l[0], soon()));
  }
  q.enqueue(make_task("fine", 1), soon());
  auto l = q.lease("w", 1, 60, soon());
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].task.task_id, "fine");
  auto dead = q.dead_letters(soon());
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].task_id, "poison");
  QueueDepth d = q.depth(soon());
  EXPECT_EQ(d.dead, 1);
  EXPECT_EQ(d.queued(), 1);
  EXPECT_EQ(q.stats().dead_lettered, 1);
}

TEST_F(RedisQueueTest, RestartedWorkerTakesBackOwnPendingFirst) {
  {
    RedisTaskQueue q(parse_redis_url(url_), "t5");
    q.enqueue(make_task("a", 0), soon());
    q.enqueue(make_task("b", 1), soon());
    ASSERT_EQ(q.lease("pod-1", 1, 60, soon()).size(), 1u);
  }  // the worker process "dies" holding "a"
  RedisTaskQueue q(parse_redis_url(url_), "t5");
  auto l = q.lease("pod-1", 1, 60, soon());
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].task.task_id, "a");
  EXPECT_EQ(l[0].delivery_count, 2u);
  EXPECT_TRUE(q.ack(l[0], soon()));
}

TEST_F(RedisQueueTest, BufferDedupeAndCheckpointRewind) {
  RedisExperienceBuffer worker(parse_redis_url(url_), "t6");
  std::vector<TaskUnit> tasks;
  for (int i = 0; i < 6; ++i) tasks.push_back(make_task("e" + std::to_string(i), i));
  for (auto& t : tasks) worker.put(record_for(t, "w1", 1), soon());
  worker.put(record_for(tasks[1], "w2", 1), soon());  // duplicate from a redelivery
  BufferSnapshot checkpoint;
  {
    RedisExperienceBuffer trainer(parse_redis_url(url_), "t6");
    auto first = trainer.take(3, soon());
    ASSERT_EQ(first.size(), 3u);
    EXPECT_EQ(first[2].task_id, "e2");
    trainer.unget({first[2]});  // did not fit in the step
    checkpoint = BufferSnapshot::decode(trainer.snapshot().encode());
    auto after = trainer.take(3, soon());  // trained after the checkpoint, then the trainer dies
    ASSERT_EQ(after.size(), 3u);
    EXPECT_EQ(after[0].task_id, "e2");
  }
  RedisExperienceBuffer restarted(parse_redis_url(url_), "t6");
  restarted.restore(checkpoint, soon());
  worker.put(record_for(tasks[0], "w3", 1), soon());  // late duplicate of a trained record
  auto rest = restarted.take(10, Deadline::after_seconds(1));
  std::vector<std::string> ids;
  for (auto& r : rest) ids.push_back(r.task_id);
  EXPECT_EQ(ids, (std::vector<std::string>{"e2", "e3", "e4", "e5"}));
  EXPECT_EQ(restarted.stats().duplicates_dropped, 2);
  restarted.checkpoint_committed(restarted.snapshot(), soon());
  RedisClient c(parse_redis_url(url_));
  EXPECT_EQ(c.command_ok({"XLEN", "t6:experience"}, soon()).integer, 1);  // only the cursor entry
}

// kill -9 the server mid-run and restart it on the same AOF dir: workers and the trainer
// reconnect with backoff and every task is trained exactly once.
TEST_F(RedisQueueTest, RedisCrashMidRunLosesNothing) {
  const int kTasks = 120;
  RedisUrl url = parse_redis_url(url_);
  {
    RedisTaskQueue producer(url, "t7");
    for (int i = 0; i < kTasks; ++i) producer.enqueue(make_task("r" + std::to_string(i), i), soon());
  }
  std::atomic<bool> stop{false};
  std::atomic<int> worker_errors{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 2; ++w) {
    workers.emplace_back([&, w] {
      RedisTaskQueue q(url, "t7");
      RedisExperienceBuffer b(url, "t7");
      std::string name = "w" + std::to_string(w);
      while (!stop.load()) {
        try {
          for (Lease& l : q.lease(name, 2, 1.0, Deadline::after_seconds(10))) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            b.put(record_for(l.task, name, 0), Deadline::after_seconds(10));
            q.ack(l, Deadline::after_seconds(10));
          }
        } catch (const Error& e) {
          ++worker_errors;
        }
      }
    });
  }
  RedisExperienceBuffer trainer(url, "t7");
  std::set<std::string> seen;
  bool restarted = false;
  Deadline end = Deadline::after_seconds(60);
  while (static_cast<int>(seen.size()) < kTasks && !end.expired()) {
    for (auto& r : trainer.take(8, Deadline::after_seconds(10))) {
      EXPECT_TRUE(seen.insert(r.task_id).second) << "trained twice: " << r.task_id;
    }
    if (!restarted && seen.size() >= kTasks / 3) {
      server_->kill9();
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      server_->restart(Deadline::after_seconds(15));
      restarted = true;
    }
  }
  stop = true;
  for (auto& t : workers) t.join();
  EXPECT_TRUE(restarted);
  EXPECT_EQ(static_cast<int>(seen.size()), kTasks);
  EXPECT_EQ(worker_errors.load(), 0);
  RedisTaskQueue q(url, "t7");
  // Tasks whose ack was lost in the crash are re-delivered and acked after lease expiry.
  wait_until([&] { return q.depth(soon()).queued() == 0; }, Deadline::after_seconds(10),
             [] { return std::string("queue never drained after the restart"); },
             [] { std::this_thread::sleep_for(std::chrono::milliseconds(50)); });
}

TEST(InProcessWeights, PublishLatestWait) {
  InProcessWeightRegistry reg;
  EXPECT_FALSE(reg.latest(soon()).has_value());
  EXPECT_FALSE(reg.wait_newer(0, Deadline::after_seconds(0.1)).has_value());
  reg.publish(1, "mem://v1", soon());
  std::thread pub([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    reg.publish(2, "mem://v2", soon());
  });
  auto v = reg.wait_newer(1, soon());
  pub.join();
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->version, 2u);
  EXPECT_EQ(v->location, "mem://v2");
  reg.publish(2, "mem://v2", soon());  // retry of the same publish is fine
  EXPECT_THROW(reg.publish(2, "mem://other", soon()), Error);
  EXPECT_THROW(reg.publish(1, "mem://v1", soon()), Error);
}

TEST_F(RedisQueueTest, WeightRegistryPublishLatestWait) {
  RedisWeightRegistry trainer(parse_redis_url(url_), "t8");
  RedisWeightRegistry worker(parse_redis_url(url_), "t8");
  EXPECT_FALSE(worker.latest(soon()).has_value());
  EXPECT_FALSE(worker.wait_newer(0, Deadline::after_seconds(0.2)).has_value());
  trainer.publish(3, "s3://b/job/v3/manifest.json", soon());
  auto l = worker.latest(soon());
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->version, 3u);
  EXPECT_GT(l->published_unix_ms, 0);
  std::thread pub([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    trainer.publish(4, "s3://b/job/v4/manifest.json", soon());
  });
  double t0 = now_seconds();
  auto v = worker.wait_newer(3, soon());
  pub.join();
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->version, 4u);
  EXPECT_EQ(v->location, "s3://b/job/v4/manifest.json");
  EXPECT_LT(now_seconds() - t0, 2.0);
  trainer.publish(4, "s3://b/job/v4/manifest.json", soon());
  EXPECT_THROW(trainer.publish(4, "s3://elsewhere", soon()), Error);
  EXPECT_THROW(trainer.publish(2, "s3://b/job/v2", soon()), Error);
  RedisClient c(parse_redis_url(url_));
  EXPECT_EQ(c.command_ok({"HGET", "t8:weights:latest", "version"}, soon()).str, "4");
}

}  // namespace
}  // namespace moerl::runtime
