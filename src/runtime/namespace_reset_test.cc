// reset_namespace against a real redis-server: an earlier trainer life leaves tasks, a
// producer cursor, experience, a quarantined record and a weight version in a namespace; a
// later life that holds the lease resets it and starts from cursor 0, training each task once
// at its first attempt, while the lease, the epoch counter and the weight versions stay. A
// trainer that does not hold the namespace (refused, or replaced while frozen) removes nothing.
#include "runtime/namespace_reset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "base/error.h"
#include "runtime/controller.h"
#include "runtime/record_check.h"
#include "runtime/redis_queue.h"
#include "runtime/runtime_config.h"
#include "runtime/test_records.h"
#include "runtime/test_redis.h"
#include "runtime/trainer_lease.h"

namespace moerl::runtime {
namespace {

Deadline soon() { return Deadline::after_seconds(10); }

TaskUnit task_at(uint64_t cursor, uint32_t attempt) { return make_task("q" + std::to_string(cursor), cursor, attempt); }

ControllerConfig checked(int64_t total) {
  ControllerConfig cfg{.total_tasks = total, .queue_ahead = 4};
  cfg.check = [](const ExperienceRecord& r) { return check_record(r, {.vocab_size = 1000, .group_size = 2}); };
  return cfg;
}

// Leases everything queued and puts one record per task; q1's first attempt is poison.
void serve(TaskQueue& q, ExperienceBuffer& b) {
  while (true) {
    auto leases = q.lease("w", 4, 30, Deadline::after_seconds(0.05));
    if (leases.empty()) return;
    for (Lease& l : leases) {
      ExperienceRecord r = record_for(l.task, "w", 0);
      if (l.task.task_id == "q1" && l.task.attempt == 0) r.samples[1].behaviour_logprobs[0] = NAN;
      b.put(r, soon());
      EXPECT_TRUE(q.ack(l, soon()));
    }
  }
}

class NamespaceResetTest : public RedisTest {
 protected:
  RuntimeConfig config(const std::string& ns) {
    RuntimeConfig c;
    c.queue_url = url_;
    c.ns = ns;
    c.trainer_lease_seconds = 1;
    return c;
  }
  std::set<std::string> keys(const std::string& ns) {
    std::set<std::string> out;
    RedisClient c(parse_redis_url(url_));
    for (const RedisReply& k : c.command_ok({"KEYS", ns + ":*"}, soon()).elements) out.insert(k.str);
    return out;
  }
};

TEST_F(NamespaceResetTest, AFreshLifeStartsFromCursorZeroAndTrainsEachTaskOnce) {
  const RuntimeConfig rc = config("reuse");
  {  // The earlier run: tasks enqueued ahead, some trained, one quarantined, a version published.
    auto lease = open_trainer_lease(rc, "earlier");
    RuntimeBackends b = open_backends(rc);
    b.buffer->set_epoch(lease->acquire(soon()));
    AsyncController ctl(checked(8), *b.queue, *b.buffer, task_at, nullptr);
    ctl.restore(BufferSnapshot{}, soon());
    ctl.top_up(soon());
    serve(*b.queue, *b.buffer);
    ASSERT_EQ(ctl.next_batch(2, 0, soon()).size(), 2u);
    ASSERT_EQ(ctl.report(soon()).get(Counter::kRecordsQuarantined), 1);
    b.weights->publish(3, "weights/v00000003", soon());
  }  // it stops (its lease released)
  const RedisKeys k("reuse");
  const std::vector<std::string> state = k.run_state();
  const std::set<std::string> kept = {k.trainer_lease, k.trainer_epoch, k.weights, k.weights_latest};
  for (const std::string& key : keys("reuse")) {
    EXPECT_TRUE(kept.count(key) || std::count(state.begin(), state.end(), key))
        << key << " is neither run state nor kept: reset_namespace does not know it";
  }
  auto lease = open_trainer_lease(rc, "fresh");
  RuntimeBackends b = open_backends(rc);
  b.buffer->set_epoch(lease->acquire(Deadline::after_seconds(3)));
  const NamespaceReset r = reset_namespace(rc, *lease, soon());
  EXPECT_EQ(r.removed, (std::vector<std::string>{k.tasks, k.producer_cursor, k.experience, k.quarantine,
                                                  k.quarantine_ids}));
  std::set<std::string> left = keys("reuse");
  left.erase(k.trainer_lease);  // ours; checked below
  EXPECT_EQ(left, (std::set<std::string>{k.trainer_epoch, k.weights, k.weights_latest}));
  lease->check(soon());
  EXPECT_EQ(lease->epoch(), 2u);
  EXPECT_EQ(b.weights->latest(soon())->version, 3u);
  Accounting acc;
  AsyncController ctl(checked(6), *b.queue, *b.buffer, task_at, &acc);
  ctl.restore(BufferSnapshot{}, soon());
  EXPECT_EQ(b.queue->producer_cursor(soon()), 0u);
  std::multiset<std::string> trained;
  for (Deadline end = Deadline::after_seconds(30); !ctl.finished(soon());) {
    ASSERT_FALSE(end.expired()) << "did not finish";
    for (const ExperienceRecord& rec : ctl.next_batch(4, 0, Deadline::after_seconds(0.5))) {
      trained.insert(dedupe_key(rec.task_id, rec.attempt));
    }
    serve(*b.queue, *b.buffer);
  }
  EXPECT_EQ(trained, (std::multiset<std::string>{"q0#0", "q1#1", "q2#0", "q3#0", "q4#0", "q5#0"}));
  AccountingReport rep = ctl.report(soon());
  EXPECT_EQ(rep.get(Counter::kTasksCreated), 6);
  EXPECT_EQ(rep.get(Counter::kDuplicatesDropped), 0);
  EXPECT_EQ(rep.get(Counter::kRecordsQuarantined), 1) << "its own q1#0 only";
  EXPECT_EQ(rep.lost, 0);
}

TEST_F(NamespaceResetTest, ANamespaceHeldByAnotherTrainerIsNotReset) {
  const RuntimeConfig rc = config("live");
  RuntimeBackends b = open_backends(rc);
  b.queue->enqueue_from(task_at(0, 0), 1, soon());
  auto live = open_trainer_lease(rc, "live");
  live->acquire(soon());
  // A second trainer started on it is refused before it could reset anything.
  auto second = open_trainer_lease(rc, "second");
  try {
    second->acquire(Deadline::after_seconds(1.5));  // past the TTL: the live one renews
    ADD_FAILURE() << "two trainers hold one namespace";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("held by another live trainer ('1 live'"), std::string::npos) << e.what();
  }
  // A trainer replaced while it was frozen (its successor holds the lease now) removes nothing.
  RedisClient raw(parse_redis_url(url_));
  raw.command_ok({"SET", "live:trainer:lease", "2 successor", "PX", "5000"}, soon());
  try {
    reset_namespace(rc, *live, soon());
    ADD_FAILURE() << "a trainer that lost the namespace reset it";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lost runtime.namespace 'live' (epoch 1)"),
              std::string::npos) << e.what();
  }
  EXPECT_EQ(b.queue->producer_cursor(soon()), 1u);
  EXPECT_EQ(b.queue->depth(soon()).queued(), 1);
}

}  // namespace
}  // namespace moerl::runtime
