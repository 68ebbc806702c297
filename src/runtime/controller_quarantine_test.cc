// AsyncController with a record check: a refused record is quarantined and counted; its
// task is enqueued again (attempt + 1) and the worker's late copy of the refused attempt is
// dropped, so every task is trained exactly once; a task whose records keep failing is given
// up (tasks_abandoned) and the run still finishes. In-process and Redis backends. Over Redis a
// record read twice (a trainer rewound to an older checkpoint, or a Redis that lost the
// group's read position) has one dead-letter entry and is counted once per timeline.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "runtime/controller.h"
#include "runtime/in_process_queue.h"
#include "runtime/record_check.h"
#include "runtime/redis_queue.h"
#include "runtime/test_records.h"
#include "runtime/test_redis.h"

namespace moerl::runtime {
namespace {

Deadline soon() { return Deadline::after_seconds(10); }

TaskUnit task_at(uint64_t cursor, uint32_t attempt) { return make_task("q" + std::to_string(cursor), cursor, attempt); }

ControllerConfig checked(int64_t total) {
  ControllerConfig cfg{.total_tasks = total, .queue_ahead = 4};
  cfg.check = [](const ExperienceRecord& r) { return check_record(r, {.vocab_size = 1000, .group_size = 2}); };
  return cfg;
}

// Leases everything and puts one record per task; `poison(task)` true: its logprob is NaN.
void serve(TaskQueue& q, ExperienceBuffer& b, const std::function<bool(const TaskUnit&)>& poison) {
  while (true) {
    auto leases = q.lease("w", 4, 30, Deadline::after_seconds(0.05));
    if (leases.empty()) return;
    for (Lease& l : leases) {
      ExperienceRecord r = record_for(l.task, "w", 0);
      if (poison(l.task)) r.samples[1].behaviour_logprobs[0] = NAN;
      b.put(r, soon());
      EXPECT_TRUE(q.ack(l, soon()));
    }
  }
}

// The `id` field (the experience entry id) of each entry of NS:experience:quarantine, in order.
std::vector<std::string> quarantine_ids(const RedisUrl& url, const std::string& ns) {
  RedisClient c(url);
  std::vector<std::string> ids;
  for (const RedisReply& e : c.command_ok({"XRANGE", ns + ":experience:quarantine", "-", "+"}, soon()).elements) {
    ids.push_back(e.at(1).at(1).str);
  }
  return ids;
}

void refused_task_is_recreated_once(TaskQueue& q, ExperienceBuffer& b, ExperienceBuffer& worker_b) {
  Accounting acc;
  AsyncController ctl(checked(6), q, b, task_at, &acc);
  ctl.top_up(soon());
  // q1's first record is poison; a late copy of that same attempt arrives sane afterwards.
  serve(q, worker_b, [](const TaskUnit& t) { return t.task_id == "q1" && t.attempt == 0; });
  worker_b.put(record_for(task_at(1, 0), "late", 0), soon());
  std::multiset<std::string> trained;
  for (Deadline end = Deadline::after_seconds(30); !ctl.finished(soon());) {
    ASSERT_FALSE(end.expired()) << "did not finish";
    for (const ExperienceRecord& r : ctl.next_batch(4, 0, Deadline::after_seconds(0.5))) {
      trained.insert(dedupe_key(r.task_id, r.attempt));
    }
    serve(q, worker_b, [](const TaskUnit&) { return false; });
  }
  EXPECT_EQ(trained, (std::multiset<std::string>{"q0#0", "q1#1", "q2#0", "q3#0", "q4#0", "q5#0"}));
  AccountingReport rep = ctl.report(soon());
  EXPECT_EQ(rep.get(Counter::kRecordsQuarantined), 1);
  EXPECT_EQ(rep.get(Counter::kTasksRequeued), 1);
  EXPECT_EQ(rep.get(Counter::kDuplicatesDropped), 1) << "the late copy of q1#0";
  EXPECT_EQ(rep.get(Counter::kTasksAbandoned), 0);
  EXPECT_EQ(rep.get(Counter::kTasksCompleted), 6);
  EXPECT_EQ(rep.lost, 0);
  EXPECT_EQ(b.stats().quarantined, 1);
}

TEST(ControllerQuarantine, RefusedTaskIsRecreatedAndTrainedOnceInProcess) {
  InProcessTaskQueue q;
  InProcessExperienceBuffer b;
  refused_task_is_recreated_once(q, b, b);
  ASSERT_EQ(b.quarantined().size(), 1u);
  EXPECT_EQ(b.quarantined()[0].task_id, "q1");
}

TEST(ControllerQuarantine, AlwaysPoisonTaskIsAbandonedAndTheRunFinishes) {
  InProcessTaskQueue q;
  InProcessExperienceBuffer b;
  Accounting acc;
  AsyncController ctl(checked(3), q, b, task_at, &acc);
  std::set<std::string> trained;
  for (Deadline end = Deadline::after_seconds(30); !ctl.finished(soon());) {
    ASSERT_FALSE(end.expired()) << "did not finish";
    serve(q, b, [](const TaskUnit& t) { return t.task_id == "q2"; });
    for (const ExperienceRecord& r : ctl.next_batch(3, 0, Deadline::after_seconds(0.5))) trained.insert(r.task_id);
  }
  EXPECT_EQ(trained, (std::set<std::string>{"q0", "q1"}));
  AccountingReport rep = ctl.report(soon());
  EXPECT_EQ(rep.get(Counter::kRecordsQuarantined), static_cast<int64_t>(kMaxQuarantinedAttempts));
  EXPECT_EQ(rep.get(Counter::kTasksAbandoned), 1);
  EXPECT_EQ(rep.get(Counter::kTasksRequeued), static_cast<int64_t>(kMaxQuarantinedAttempts) - 1);
  EXPECT_EQ(rep.lost, 0);
}

class ControllerQuarantineRedisTest : public RedisTest {};

TEST_F(ControllerQuarantineRedisTest, RefusedTaskIsRecreatedAndTrainedOnce) {
  RedisUrl url = parse_redis_url(url_);
  RedisTaskQueue q(url, "quar");
  RedisExperienceBuffer b(url, "quar");
  RedisExperienceBuffer worker_b(url, "quar");
  refused_task_is_recreated_once(q, b, worker_b);
  // The dead-letter stream holds the refused record with its reason and bytes.
  RedisClient c(url);
  RedisReply qr = c.command_ok({"XRANGE", "quar:experience:quarantine", "-", "+"}, soon());
  ASSERT_EQ(qr.elements.size(), 1u);
  const auto& f = qr.elements[0].elements.at(1).elements;
  ASSERT_EQ(f.size(), 8u);
  EXPECT_EQ(f[2].str, "key");
  EXPECT_EQ(f[3].str, "q1#0");
  EXPECT_NE(f[5].str.find("q1#0 sample 1: behaviour logprob of response token 0 is nan"), std::string::npos)
      << f[5].str;
  EXPECT_EQ(decode_experience(f[7].str).task_id, "q1");
}

// A trainer that quarantined a record and re-created its task, then died before its next
// checkpoint: the restored one reads the refused entry again, reserves its key again and
// re-creates the task again (a duplicate of the queued re-creation), so the worker's late
// copy of the refused attempt is still dropped and the task is trained exactly once. The
// dead-letter stream keeps the one entry the first life wrote, and the restored accounting
// (the checkpoint's, from before the record was read) counts it once.
TEST_F(ControllerQuarantineRedisTest, RewindAfterACrashJudgesTheRefusedRecordAgain) {
  RedisUrl url = parse_redis_url(url_);
  RedisTaskQueue q(url, "rew");
  RedisExperienceBuffer worker_b(url, "rew");
  std::multiset<std::string> trained;
  BufferSnapshot checkpoint;
  {
    RedisExperienceBuffer b(url, "rew");
    AsyncController ctl(checked(4), q, b, task_at, nullptr);
    ctl.top_up(soon());
    checkpoint = ctl.snapshot();  // before anything was read
    serve(q, worker_b, [](const TaskUnit& t) { return t.task_id == "q1" && t.attempt == 0; });
    for (const ExperienceRecord& r : ctl.next_batch(3, 0, soon())) trained.insert(dedupe_key(r.task_id, r.attempt));
    ASSERT_EQ(ctl.report(soon()).get(Counter::kRecordsQuarantined), 1);
  }  // crash: nothing trained after `checkpoint` counts
  const std::vector<std::string> first = quarantine_ids(url, "rew");
  ASSERT_EQ(first.size(), 1u);
  const std::string first_id = first[0];
  trained.clear();
  worker_b.put(record_for(task_at(1, 0), "late", 0), soon());  // a late copy of q1#0
  RedisExperienceBuffer b(url, "rew");
  Accounting acc;
  AsyncController ctl(checked(4), q, b, task_at, &acc);
  ctl.restore(checkpoint, soon());
  for (Deadline end = Deadline::after_seconds(30); !ctl.finished(soon());) {
    ASSERT_FALSE(end.expired()) << "did not finish";
    serve(q, worker_b, [](const TaskUnit&) { return false; });
    for (const ExperienceRecord& r : ctl.next_batch(4, 0, Deadline::after_seconds(0.5))) {
      trained.insert(dedupe_key(r.task_id, r.attempt));
    }
  }
  // The second re-creation of q1 may still be queued: served and dropped as a duplicate, as
  // QueueSource::finish lets the workers empty the queue.
  serve(q, worker_b, [](const TaskUnit&) { return false; });
  for (const ExperienceRecord& r : ctl.next_batch(1, 0, Deadline::after_seconds(0.3))) {
    trained.insert(dedupe_key(r.task_id, r.attempt));
  }
  EXPECT_EQ(trained, (std::multiset<std::string>{"q0#0", "q1#1", "q2#0", "q3#0"}));
  AccountingReport rep = ctl.report(soon());
  EXPECT_EQ(rep.still_queued, 0);
  EXPECT_EQ(rep.get(Counter::kRecordsQuarantined), 1);
  EXPECT_EQ(rep.lost, 0);
  EXPECT_EQ(quarantine_ids(url, "rew"), std::vector<std::string>{first_id}) << "one dead letter per entry";
}

// A Redis restarted from an older AOF forgets how far the trainer's group had read: the
// trainer reads the refused entry again within the same life. It is neither counted nor
// handed to the controller again (its task was already re-created), and its dead letter is
// not written twice; once a checkpoint past it is committed its id is forgotten.
TEST_F(ControllerQuarantineRedisTest, ARecordReadAgainInOneLifeIsQuarantinedAndCountedOnce) {
  RedisUrl url = parse_redis_url(url_);
  RedisTaskQueue q(url, "again");
  RedisExperienceBuffer b(url, "again");
  RedisExperienceBuffer worker_b(url, "again");
  Accounting acc;
  AsyncController ctl(checked(4), q, b, task_at, &acc);
  ctl.top_up(soon());
  serve(q, worker_b, [](const TaskUnit& t) { return t.task_id == "q1" && t.attempt == 0; });
  std::multiset<std::string> trained;
  for (const ExperienceRecord& r : ctl.next_batch(3, 0, soon())) trained.insert(dedupe_key(r.task_id, r.attempt));
  ASSERT_EQ(acc.get(Counter::kRecordsQuarantined), 1);
  RedisClient c(url);
  c.command_ok({"XGROUP", "SETID", "again:experience", "trainer", "0-0"}, soon());  // the group's position lost
  for (Deadline end = Deadline::after_seconds(30); !ctl.finished(soon());) {
    ASSERT_FALSE(end.expired()) << "did not finish";
    serve(q, worker_b, [](const TaskUnit&) { return false; });
    for (const ExperienceRecord& r : ctl.next_batch(4, 0, Deadline::after_seconds(0.5))) {
      trained.insert(dedupe_key(r.task_id, r.attempt));
    }
  }
  EXPECT_EQ(trained, (std::multiset<std::string>{"q0#0", "q1#1", "q2#0", "q3#0"}));
  AccountingReport rep = ctl.report(soon());
  EXPECT_EQ(rep.get(Counter::kRecordsQuarantined), 1);
  EXPECT_EQ(rep.get(Counter::kTasksRequeued), 1);
  EXPECT_EQ(rep.lost, 0);
  EXPECT_EQ(b.stats().quarantined, 1);
  EXPECT_EQ(quarantine_ids(url, "again").size(), 1u);
  b.checkpoint_committed(ctl.snapshot(), soon());
  EXPECT_EQ(c.command_ok({"ZCARD", "again:experience:quarantine:ids"}, soon()).integer, 0)
      << "ids below a committed checkpoint can never be read again";
}

}  // namespace
}  // namespace moerl::runtime
