// [runtime] config parsing and the backend factory.
#include "runtime/runtime_config.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "runtime/test_records.h"
#include "runtime/test_redis.h"

namespace moerl::runtime {
namespace {

RuntimeConfig parse(const std::string& toml) {
  ConfigDoc doc = ConfigDoc::parse(toml, "test.toml");
  return RuntimeConfig::from_config(doc.root().table("runtime"));
}

TEST(RuntimeConfigTest, DefaultsAndOverrides) {
  RuntimeConfig d = parse("");
  EXPECT_EQ(d.backend(), BackendKind::kInProcess);
  EXPECT_EQ(d.drain_seconds, 90);
  EXPECT_FALSE(d.spot_enabled);
  RuntimeConfig c = parse(R"(
[runtime]
queue_url = "redis://:pw@127.0.0.1:7000/1"
namespace = "job7"
lease_seconds = 20
max_staleness = 3
stale_policy = "regenerate"
[runtime.spot]
enabled = true
metadata_url = "http://127.0.0.1:9"
poll_seconds = 0.5
)");
  EXPECT_EQ(c.backend(), BackendKind::kRedis);
  EXPECT_EQ(c.ns, "job7");
  EXPECT_EQ(c.max_staleness, 3u);
  EXPECT_EQ(c.stale_policy, StalePolicy::kRegenerate);
  EXPECT_TRUE(c.spot_enabled);
  EXPECT_EQ(c.spot.poll_seconds, 0.5);
  EXPECT_EQ(c.to_json()["queue_url"], "redis://:***@127.0.0.1:7000/1");
  WorkerLoopConfig w = worker_loop_config(c, "pod-1");
  EXPECT_EQ(w.lease_seconds, 20);
  EXPECT_EQ(w.worker_id, "pod-1");
}

TEST(RuntimeConfigTest, RejectsBadValuesByName) {
  auto expect_error = [](const std::string& toml, const std::string& needle) {
    try {
      parse(toml);
      FAIL() << "accepted: " << toml;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error("[runtime]\nqueue_url = \"amqp://x\"\n", "amqp://x");
  expect_error("[runtime]\nlease_seconds = 5\nrenew_seconds = 6\n", "renew_seconds");
  expect_error("[runtime]\nstale_policy = \"maybe\"\n", "stale_policy");
  expect_error("[runtime]\nleese_seconds = 5\n", "leese_seconds");
  expect_error("[runtime.spot]\nmetadata_url = \"file:///x\"\n", "metadata_url");
}

TEST(RuntimeConfigTest, OpensInProcessBackends) {
  RuntimeBackends b = open_backends(parse(""));
  b.queue->enqueue(make_task("a", 1), Deadline::after_seconds(1));
  EXPECT_EQ(b.queue->lease("w", 1, 10, Deadline::after_seconds(1)).size(), 1u);
  b.weights->publish(1, "mem://v1", Deadline::after_seconds(1));
  EXPECT_EQ(b.weights->latest(Deadline::after_seconds(1))->version, 1u);
}

class RuntimeConfigRedisTest : public RedisTest {};

TEST_F(RuntimeConfigRedisTest, OpensRedisBackends) {
  RuntimeBackends b = open_backends(parse("[runtime]\nqueue_url = \"" + url_ + "\"\nnamespace = \"f\"\n"));
  TaskUnit t = make_task("a", 1);
  b.queue->enqueue(t, Deadline::after_seconds(5));
  auto l = b.queue->lease("w", 1, 10, Deadline::after_seconds(5));
  ASSERT_EQ(l.size(), 1u);
  b.buffer->put(record_for(l[0].task, "w", 0), Deadline::after_seconds(5));
  EXPECT_TRUE(b.queue->ack(l[0], Deadline::after_seconds(5)));
  EXPECT_EQ(b.buffer->take(1, Deadline::after_seconds(5)).size(), 1u);
}

TEST(RuntimeConfigTest, PublishEveryWithinTheStalenessBudget) {
  EXPECT_EQ(parse("").publish_every, 1);
  EXPECT_EQ(parse("[runtime]\npublish_every = 3\nmax_staleness = 3\n").publish_every, 3);
  try {
    parse("[runtime]\npublish_every = 4\nmax_staleness = 2\n");
    FAIL() << "publish_every > max_staleness was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("publish_every=4"), std::string::npos) << e.what();
  }
}

// 0 = automatic (job/queue_ahead.h); anything else is a task count of at least 1.
TEST(RuntimeConfigTest, QueueAheadIsAutomaticOrACount) {
  EXPECT_EQ(parse("").queue_ahead, 0);
  const RuntimeConfig c = parse("[runtime]\nqueue_ahead = 80\n");
  EXPECT_EQ(c.queue_ahead, 80);
  EXPECT_EQ(c.to_json()["queue_ahead"], 80);
  for (const std::string bad : {"-1", "1048577", "1.5", "\"auto\""}) {
    try {
      parse("[runtime]\nqueue_ahead = " + bad + "\n");
      ADD_FAILURE() << "queue_ahead = " << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("runtime.queue_ahead"), std::string::npos) << e.what();
    }
  }
}

TEST(RedactUrl, HidesThePasswordOnly) {
  EXPECT_EQ(redact_url("redis://:s3cret@redis.ns.svc:6379/0"), "redis://:***@redis.ns.svc:6379/0");
  EXPECT_EQ(redact_url("redis://user:pw@127.0.0.1:6379"), "redis://user:***@127.0.0.1:6379");
  EXPECT_EQ(redact_url("redis://127.0.0.1:6379/0"), "redis://127.0.0.1:6379/0");
  // No colon: the parser takes all of it as the password, so all of it is hidden.
  EXPECT_EQ(redact_url("redis://s3cret@host:6379"), "redis://***@host:6379");
  EXPECT_EQ(redact_url("redis://:p@ss@host:6379"), "redis://:***@host:6379");
  EXPECT_EQ(redact_url("amqp://u:s3cret@host"), "amqp://u:***@host");
  EXPECT_EQ(redact_url("inprocess"), "inprocess");
}

}  // namespace
}  // namespace moerl::runtime
