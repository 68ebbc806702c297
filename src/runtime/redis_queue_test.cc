// Redis Streams backends against a real redis-server started by the test: the shared
// TaskQueue / ExperienceBuffer / WeightRegistry contracts (test_queue_contract.h), and what is
// Redis-only: URL parsing, auth and db, own-pending recovery of a restarted worker, XTRIM on
// checkpoint commit, the weights hash, and a Redis crash mid-run.
#include "runtime/redis_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <thread>

#include "base/error.h"
#include "base/files.h"
#include "runtime/test_queue_contract.h"
#include "runtime/test_records.h"
#include "runtime/test_redis.h"
#include "runtime/weight_registry.h"

namespace moerl::runtime {
namespace {

Deadline soon() { return Deadline::after_seconds(10); }

// Every open is a new connection to one redis-server, started per test.
class RedisBackend : public QueueBackend {
 public:
  std::shared_ptr<TaskQueue> open_queue(const std::string& ns, QueueOptions options) override {
    return std::make_shared<RedisTaskQueue>(url_, ns, options);
  }
  std::shared_ptr<ExperienceBuffer> buffer(const std::string& ns) override {
    return std::make_shared<RedisExperienceBuffer>(url_, ns);
  }
  std::shared_ptr<WeightRegistry> weights(const std::string& ns) override {
    return std::make_shared<RedisWeightRegistry>(url_, ns);
  }
  void kill_trainer(const std::string& ns) override {}

 private:
  ScratchRedis redis_;
  const RedisUrl url_ = parse_redis_url(redis_.url());  // immutable after construction
};

const QueueBackendFactory kRedis{"Redis", [] { return std::make_unique<RedisBackend>(); }};
INSTANTIATE_TEST_SUITE_P(Redis, TaskQueueContract, ::testing::Values(kRedis));
INSTANTIATE_TEST_SUITE_P(Redis, ExperienceBufferContract, ::testing::Values(kRedis));
INSTANTIATE_TEST_SUITE_P(Redis, WeightRegistryContract, ::testing::Values(kRedis));

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

// Redis ends a BLOCK on its timer tick (hz 10: ~100 ms late). A streaming rollout worker
// polls the queue between decode windows with a wait of a few ms; each such poll used to
// stall its decode loop ~90 ms. Short waits on an empty queue, buffer and registry end by
// their deadline (median of 7, well under a tick).
TEST_F(RedisQueueTest, ShortWaitsEndByTheirDeadlineNotRedisTimerTick) {
  RedisTaskQueue q(parse_redis_url(url_), "short");
  RedisExperienceBuffer buf(parse_redis_url(url_), "short");
  RedisWeightRegistry reg(parse_redis_url(url_), "short");
  q.enqueue(make_task("a", 0), soon());
  ASSERT_EQ(q.lease("w", 1, 60, soon()).size(), 1u);  // the group exists, the queue is empty
  auto median_s = [](const std::function<void()>& wait) {
    std::vector<double> t;
    for (int i = 0; i < 7; ++i) {
      const double t0 = now_seconds();
      wait();
      t.push_back(now_seconds() - t0);
    }
    std::sort(t.begin(), t.end());
    return t[3];
  };
  const double wait = 0.005;
  EXPECT_LT(median_s([&] { EXPECT_TRUE(q.lease("w", 1, 60, Deadline::after_seconds(wait)).empty()); }), 0.05);
  EXPECT_LT(median_s([&] { EXPECT_TRUE(buf.take(1, Deadline::after_seconds(wait)).empty()); }), 0.05);
  EXPECT_LT(median_s([&] { EXPECT_FALSE(reg.wait_newer(0, Deadline::after_seconds(wait))); }), 0.05);
  // A longer wait still waits (blocking), and ends within a tick of its deadline.
  const double t0 = now_seconds();
  EXPECT_TRUE(q.lease("w", 1, 60, Deadline::after_seconds(0.3)).empty());
  EXPECT_GE(now_seconds() - t0, 0.29);
}

// The trainer reads records and Redis goes away before the XACK (the AsyncChaos flake: eight
// tasks read in the take() that hit the kill were never trained). The records must come
// back from the next take(), once, in order. The failing XACK is staged with an ACL rule.
TEST_F(RedisQueueTest, RecordsReadWhenTheAckFailsAreNotLost) {
  RedisExperienceBuffer buf(parse_redis_url(url_), "ackfail");
  for (uint64_t c = 0; c < 3; ++c) buf.put(record_for(make_task("t" + std::to_string(c), c), "w", 1), soon());
  RedisClient admin(parse_redis_url(url_));
  admin.command_ok({"ACL", "SETUSER", "default", "-xack"}, soon());
  EXPECT_THROW(buf.take(3, soon()), Error);
  admin.command_ok({"ACL", "SETUSER", "default", "+xack"}, soon());
  std::vector<ExperienceRecord> got = buf.take(3, soon());
  ASSERT_EQ(got.size(), 3u);
  for (uint64_t c = 0; c < 3; ++c) EXPECT_EQ(got[c].task_id, "t" + std::to_string(c));
  EXPECT_TRUE(buf.take(3, Deadline::after_seconds(0.3)).empty());
  EXPECT_EQ(buf.stats().taken, 3);
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

// After the checkpoint that covers every record is durable, the stream keeps only the
// cursor's entry.
TEST_F(RedisQueueTest, CheckpointCommittedTrimsTheStream) {
  RedisExperienceBuffer worker(parse_redis_url(url_), "t6");
  for (int i = 0; i < 6; ++i) worker.put(record_for(make_task("e" + std::to_string(i), i), "w1", 1), soon());
  worker.put(record_for(make_task("e1", 1), "w2", 1), soon());  // duplicate from a redelivery
  RedisExperienceBuffer trainer(parse_redis_url(url_), "t6");
  EXPECT_EQ(trainer.take(10, Deadline::after_seconds(1)).size(), 6u);
  trainer.checkpoint_committed(trainer.snapshot(), soon());
  RedisClient c(parse_redis_url(url_));
  EXPECT_EQ(c.command_ok({"XLEN", "t6:experience"}, soon()).integer, 1);  // only the cursor entry
}

// A Redis at its maxmemory (noeviction) refuses writes with OOM: a put waits (backpressure)
// and goes through once memory is freed, and at its deadline fails as "unavailable", which
// the worker loop retries, naming the cause, instead of an I/O error that ends the worker.
TEST_F(RedisQueueTest, OutOfMemoryIsBackpressureNotAnError) {
  RedisClient admin(parse_redis_url(url_));
  admin.command_ok({"CONFIG", "SET", "maxmemory-policy", "noeviction"}, soon());
  // maxmemory 2 MiB above what the empty server uses; 4 MiB of ballast puts it over.
  const std::string info = admin.command_ok({"INFO", "memory"}, soon()).str;
  const size_t at = info.find("used_memory:");
  ASSERT_NE(at, std::string::npos) << info;
  const int64_t used = std::stoll(info.substr(at + 12));
  admin.command_ok({"SET", "ballast", std::string(4 << 20, 'b')}, soon());
  admin.command_ok({"CONFIG", "SET", "maxmemory", std::to_string(used + (2 << 20))}, soon());
  RedisExperienceBuffer buf(parse_redis_url(url_), "oom");
  TaskUnit t = make_task("t1", 1);
  try {
    buf.put(record_for(t, "w", 0), Deadline::after_seconds(0.5));
    ADD_FAILURE() << "a put into a full Redis succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable) << e.what();
    EXPECT_NE(std::string(e.what()).find("maxmemory"), std::string::npos) << e.what();
  }
  std::thread freer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    RedisClient c(parse_redis_url(url_));
    c.command_ok({"DEL", "ballast"}, soon());
  });
  const double t0 = now_seconds();
  buf.put(record_for(t, "w", 0), soon());  // waits, then succeeds
  EXPECT_GT(now_seconds() - t0, 0.4);
  freer.join();
  EXPECT_EQ(buf.take(1, soon()).size(), 1u);
}

TEST_F(RedisQueueTest, LatestWeightsLiveInAHash) {
  RedisWeightRegistry trainer(parse_redis_url(url_), "t8");
  trainer.publish(3, "s3://b/job/v3/manifest.json", soon());
  trainer.publish(4, "s3://b/job/v4/manifest.json", soon());
  RedisClient c(parse_redis_url(url_));
  EXPECT_EQ(c.command_ok({"HGET", "t8:weights:latest", "version"}, soon()).str, "4");
}

}  // namespace
}  // namespace moerl::runtime
