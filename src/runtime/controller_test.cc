// AsyncController: queue top-up, staleness handling (drop / regenerate), idle accounting,
// and restart from a snapshot without duplicating or losing tasks (in-process and Redis).
#include "runtime/controller.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "runtime/in_process_queue.h"
#include "runtime/redis_queue.h"
#include "runtime/test_records.h"
#include "runtime/test_redis.h"

namespace moerl::runtime {
namespace {

Deadline soon() { return Deadline::after_seconds(10); }

TaskUnit task_at(uint64_t cursor, uint32_t attempt) {
  return make_task("q" + std::to_string(cursor), cursor, attempt);
}

// Completes every task it can lease, stamping `version` on the record.
int serve(TaskQueue& q, ExperienceBuffer& b, uint64_t version, int max = 1000) {
  int n = 0;
  while (n < max) {
    auto leases = q.lease("w", 4, 30, Deadline::after_seconds(0.05));
    if (leases.empty()) break;
    for (Lease& l : leases) {
      b.put(record_for(l.task, "w", version), soon());
      EXPECT_TRUE(q.ack(l, soon()));
      ++n;
    }
  }
  return n;
}

// Serves and trains until the controller is finished (30 s at most); every task trained once.
AccountingReport run_to_end(AsyncController& ctl, TaskQueue& q, ExperienceBuffer& b, std::set<std::string>& trained) {
  Deadline end = Deadline::after_seconds(30);
  while (!ctl.finished(soon()) && !end.expired()) {
    serve(q, b, 0);
    for (auto& r : ctl.next_batch(4, 0, Deadline::after_seconds(0.5))) {
      EXPECT_TRUE(trained.insert(r.task_id).second) << "trained twice: " << r.task_id;
    }
  }
  return ctl.report(soon());
}

TEST(Controller, TopUpKeepsQueueAheadAndStopsAtTotal) {
  InProcessTaskQueue q;
  InProcessExperienceBuffer b;
  Accounting acc;
  AsyncController ctl({.total_tasks = 10, .queue_ahead = 4, .first_cursor = 100}, q, b, task_at, &acc);
  EXPECT_EQ(ctl.top_up(soon()), 4);
  EXPECT_EQ(ctl.top_up(soon()), 0);
  EXPECT_EQ(q.depth(soon()).ready, 4);
  EXPECT_EQ(ctl.data_cursor(), 104u);
  EXPECT_EQ(serve(q, b, 0), 4);
  auto batch = ctl.next_batch(4, 0, soon());
  ASSERT_EQ(batch.size(), 4u);
  EXPECT_EQ(batch[0].task_id, "q100");
  while (!ctl.finished(soon())) {
    serve(q, b, 0);
    ctl.next_batch(2, 0, Deadline::after_seconds(1));
  }
  AccountingReport r = ctl.report(soon());
  EXPECT_EQ(r.get(Counter::kTasksCreated), 10);
  EXPECT_EQ(r.get(Counter::kTasksCompleted), 10);
  EXPECT_EQ(r.lost, 0);
  EXPECT_GT(r.trainer_idle_fraction, 0.0);
}

// Under kDrop a stale group is discarded and a fresh prompt replaces it: the run still
// trains total_tasks groups (it used to end short, and the trainer with fewer steps).
TEST(Controller, DroppedStaleGroupsAreReplacedByFreshPrompts) {
  InProcessTaskQueue q;
  InProcessExperienceBuffer b;
  Accounting acc;
  AsyncController ctl({.total_tasks = 6, .queue_ahead = 3, .stale = {.max_staleness = 1, .policy = StalePolicy::kDrop}},
                      q, b, task_at, &acc);
  ctl.top_up(soon());
  EXPECT_EQ(serve(q, b, 0), 3);  // generated at version 0, trained at version 5: stale
  EXPECT_TRUE(ctl.next_batch(3, 5, Deadline::after_seconds(0.3)).empty());
  std::set<std::string> trained;
  for (Deadline end = Deadline::after_seconds(30); !ctl.finished(soon()) && !end.expired();) {
    serve(q, b, 5);
    for (auto& r : ctl.next_batch(3, 5, Deadline::after_seconds(0.5))) {
      EXPECT_TRUE(trained.insert(r.task_id).second) << "trained twice: " << r.task_id;
    }
  }
  EXPECT_EQ(trained.size(), 6u);
  EXPECT_EQ(trained.count("q0") + trained.count("q1") + trained.count("q2"), 0u);
  AccountingReport r = ctl.report(soon());
  EXPECT_EQ(r.get(Counter::kStaleDropped), 3);
  EXPECT_EQ(r.get(Counter::kTasksCreated), 9);
  EXPECT_EQ(r.get(Counter::kTasksCompleted), 9);
  EXPECT_EQ(r.lost, 0);
}

TEST(Controller, RegeneratesStaleTasksWithNextAttempt) {
  InProcessTaskQueue q;
  InProcessExperienceBuffer b;
  Accounting acc;
  ControllerConfig cfg{.total_tasks = 3, .queue_ahead = 3,
                       .stale = {.max_staleness = 1, .policy = StalePolicy::kRegenerate}};
  AsyncController ctl(cfg, q, b, task_at, &acc);
  ctl.top_up(soon());
  serve(q, b, /*version=*/2);  // current will be 5: lag 3 > 1
  auto batch = ctl.next_batch(3, 5, Deadline::after_seconds(0.3));
  EXPECT_TRUE(batch.empty());
  EXPECT_EQ(acc.get(Counter::kStaleDropped), 3);
  EXPECT_EQ(acc.get(Counter::kTasksRequeued), 3);
  auto regen = q.lease("w", 3, 30, soon());
  ASSERT_EQ(regen.size(), 3u);
  EXPECT_EQ(regen[0].task.attempt, 1u);
  for (Lease& l : regen) {
    b.put(record_for(l.task, "w", 5), soon());
    q.ack(l, soon());
  }
  batch = ctl.next_batch(3, 5, soon());
  EXPECT_EQ(batch.size(), 3u);
  EXPECT_TRUE(ctl.finished(soon()));
  EXPECT_EQ(ctl.report(soon()).lost, 0);
  EXPECT_EQ(ctl.report(soon()).staleness_histogram.at(3), 3);
}

// Dynamic sampling: records of odd cursors have equal rewards and are completed without
// being trained; the controller queues more tasks ahead as the kept fraction falls, and the
// accounting still balances.
TEST(Controller, DropsGroupsWithoutSignalAndQueuesMoreAhead) {
  InProcessTaskQueue q;
  InProcessExperienceBuffer b;
  Accounting acc;
  ControllerConfig cfg{.total_tasks = 40, .queue_ahead = 4, .drop_no_signal = true, .max_queue_factor = 3};
  AsyncController ctl(cfg, q, b, task_at, &acc);
  auto serve_half_flat = [&] {
    while (true) {
      auto leases = q.lease("w", 4, 30, Deadline::after_seconds(0.05));
      if (leases.empty()) break;
      for (Lease& l : leases) {
        ExperienceRecord r = record_for(l.task, "w", 0);
        if (l.task.cursor % 2) for (Sample& smp : r.samples) smp.reward = 1.0f;
        b.put(r, soon());
        q.ack(l, soon());
      }
    }
  };
  EXPECT_EQ(ctl.top_up(soon()), 4);
  std::vector<uint64_t> trained;
  int64_t most_queued = 0;
  while (!ctl.finished(soon())) {
    serve_half_flat();
    for (const ExperienceRecord& r : ctl.next_batch(2, 0, Deadline::after_seconds(0.3))) {
      EXPECT_TRUE(has_signal(r));
      trained.push_back(r.cursor);
    }
    ctl.top_up(soon());
    most_queued = std::max(most_queued, q.depth(soon()).queued());
  }
  EXPECT_EQ(trained.size(), 20u);
  for (uint64_t c : trained) EXPECT_EQ(c % 2, 0u);
  // Every task created and completed: a further wait returns at once instead of at the deadline.
  const double t0 = now_seconds();
  EXPECT_TRUE(ctl.next_batch(2, 0, Deadline::after_seconds(60)).empty());
  EXPECT_LT(now_seconds() - t0, 5.0);
  // Half the records are kept: the queue target grows from 4 to ~12 (4 / 0.5 plus the margin
  // for the spread of the kept count; cap 4 x 3).
  EXPECT_GT(most_queued, 4);
  EXPECT_LE(most_queued, 12);
  AccountingReport r = ctl.report(soon());
  EXPECT_EQ(r.get(Counter::kGroupsFiltered), 20);
  EXPECT_EQ(r.get(Counter::kTasksCompleted), 40);
  EXPECT_EQ(r.lost, 0);
}

TEST(Records, HasSignalWhenRewardsDiffer) {
  ExperienceRecord r = record_for(make_task("t", 1), "w", 0);
  EXPECT_TRUE(has_signal(r));
  for (Sample& s : r.samples) s.reward = 0.25f;
  EXPECT_FALSE(has_signal(r));
  r.samples.back().reward = 0.5f;
  EXPECT_TRUE(has_signal(r));
  r.samples.clear();
  EXPECT_FALSE(has_signal(r));
}

class ControllerRedisTest : public RedisTest {};

// The trainer crashes after enqueueing past its checkpoint: the restarted controller neither
// re-enqueues those tasks nor loses them, trains each exactly once, and accounting balances.
// An in-process queue dies with its process: tasks queued or leased at the checkpoint are
// gone after a restart, and the controller must create them again (a short last batch and
// lost tasks otherwise).
TEST(Controller, RestartOnAFreshInProcessQueueEnqueuesTheLostTasksAgain) {
  ControllerConfig cfg{.total_tasks = 12, .queue_ahead = 4};
  std::set<std::string> trained;
  BufferSnapshot checkpoint;
  {
    InProcessTaskQueue q;
    InProcessExperienceBuffer b;
    Accounting acc;
    AsyncController ctl(cfg, q, b, task_at, &acc);
    ctl.top_up(soon());
    for (Lease& l : q.lease("w", 2, 30, soon())) {  // 2 of the 4 queued tasks generated
      b.put(record_for(l.task, "w", 0), soon());
      ASSERT_TRUE(q.ack(l, soon()));
    }
    for (auto& r : ctl.next_batch(2, 0, soon())) trained.insert(r.task_id);
    ASSERT_EQ(trained.size(), 2u);
    ASSERT_EQ(q.depth(soon()).ready, 2);
    checkpoint = BufferSnapshot::decode(ctl.snapshot().encode());
  }  // the process dies with its queue
  InProcessTaskQueue q;
  InProcessExperienceBuffer b;
  Accounting acc;
  AsyncController ctl(cfg, q, b, task_at, &acc);
  ctl.restore(checkpoint, soon());
  EXPECT_GE(q.depth(soon()).ready, 2) << "the tasks queued at the checkpoint must be queued again";
  AccountingReport rep = run_to_end(ctl, q, b, trained);
  EXPECT_EQ(trained.size(), 12u);
  EXPECT_EQ(rep.get(Counter::kTasksCompleted), 12);
  EXPECT_EQ(rep.lost, 0) << rep.to_json().dump();
}

// A stale record's regeneration (attempt + 1) queued at the checkpoint is lost with an
// in-process queue too: the snapshot carries it, and the restart enqueues it again.
TEST(Controller, RestartOnAFreshInProcessQueueRegeneratesTheStaleAgain) {
  ControllerConfig cfg{.total_tasks = 2, .queue_ahead = 2};
  cfg.stale = {.max_staleness = 0, .policy = StalePolicy::kRegenerate};
  BufferSnapshot checkpoint;
  {
    InProcessTaskQueue q;
    InProcessExperienceBuffer b;
    Accounting acc;
    AsyncController ctl(cfg, q, b, task_at, &acc);
    ctl.top_up(soon());
    serve(q, b, /*version=*/0);
    // The trainer is at version 1: both records are stale and their tasks queued again.
    EXPECT_TRUE(ctl.next_batch(2, 1, Deadline::after_seconds(0.5)).empty());
    ASSERT_EQ(q.depth(soon()).ready, 2);
    checkpoint = BufferSnapshot::decode(ctl.snapshot().encode());
  }
  InProcessTaskQueue q;
  InProcessExperienceBuffer b;
  Accounting acc;
  AsyncController ctl(cfg, q, b, task_at, &acc);
  ctl.restore(checkpoint, soon());
  std::vector<Lease> leases = q.lease("w", 4, 30, soon());
  ASSERT_EQ(leases.size(), 2u);
  for (const Lease& l : leases) EXPECT_EQ(l.task.attempt, 1u) << l.task.task_id;
}

TEST_F(ControllerRedisTest, RestartResumesWithoutDuplicatesOrLoss) {
  RedisUrl url = parse_redis_url(url_);
  RedisTaskQueue worker_q(url, "ctl");
  RedisExperienceBuffer worker_b(url, "ctl");
  ControllerConfig cfg{.total_tasks = 12, .queue_ahead = 4};
  std::set<std::string> trained;
  BufferSnapshot checkpoint;
  std::set<std::string> trained_at_checkpoint;
  uint64_t cursor_at_crash = 0;
  {
    RedisTaskQueue q(url, "ctl");
    RedisExperienceBuffer b(url, "ctl");
    Accounting acc;
    AsyncController ctl(cfg, q, b, task_at, &acc);
    ctl.top_up(soon());
    serve(worker_q, worker_b, 0);
    for (auto& r : ctl.next_batch(4, 0, soon())) trained.insert(r.task_id);
    checkpoint = BufferSnapshot::decode(ctl.snapshot().encode());
    trained_at_checkpoint = trained;
    serve(worker_q, worker_b, 0, 2);
    for (auto& r : ctl.next_batch(2, 0, soon())) trained.insert(r.task_id);
    cursor_at_crash = ctl.data_cursor();  // next_batch topped up past the checkpoint
  }  // the trainer dies
  ASSERT_GT(cursor_at_crash, checkpoint.data_cursor);
  trained = trained_at_checkpoint;  // training after the checkpoint died with the process
  RedisTaskQueue q(url, "ctl");
  RedisExperienceBuffer b(url, "ctl");
  Accounting acc;
  AsyncController ctl(cfg, q, b, task_at, &acc);
  ctl.restore(checkpoint, soon());
  EXPECT_EQ(ctl.data_cursor(), cursor_at_crash) << "must resume after the tasks the first life enqueued";
  AccountingReport rep = run_to_end(ctl, worker_q, worker_b, trained);
  EXPECT_EQ(trained.size(), 12u);
  EXPECT_EQ(rep.get(Counter::kTasksCreated), 12);
  EXPECT_EQ(rep.get(Counter::kTasksCompleted), 12);
  EXPECT_EQ(rep.lost, 0) << rep.to_json().dump();
  EXPECT_EQ(q.stats().enqueued, static_cast<int64_t>(12 - cursor_at_crash))
      << "only tasks past the first life's cursor are new after the restart";
}

// redis-server SIGKILLed and back a second later (from its AOF): the trainer's next_batch
// rides through the outage (it used to throw "XREADGROUP got no answer in 0.5 s" at once),
// and gets the records the workers put once Redis is back.
TEST_F(ControllerRedisTest, NextBatchRidesThroughARedisRestart) {
  RedisUrl url = parse_redis_url(url_);
  RedisTaskQueue q(url, "outage");
  RedisExperienceBuffer b(url, "outage");
  RedisTaskQueue worker_q(url, "outage");
  RedisExperienceBuffer worker_b(url, "outage");
  Accounting acc;
  AsyncController ctl({.total_tasks = 4, .queue_ahead = 4, .call_timeout_seconds = 20}, q, b, task_at, &acc);
  ctl.top_up(soon());
  ASSERT_TRUE(ctl.next_batch(4, 0, Deadline::after_seconds(0.2)).empty());  // the group exists
  std::vector<ExperienceRecord> got;
  std::string error;
  std::thread trainer([&] {
    try {
      for (Deadline d = Deadline::after_seconds(30); got.size() < 4 && !d.expired();) {
        for (auto& r : ctl.next_batch(4 - got.size(), 0, Deadline::after_seconds(2))) got.push_back(std::move(r));
      }
    } catch (const Error& e) {
      error = e.what();
    }
  });
  // Killed while the trainer blocks in XREADGROUP (where it spends its waits), back 1 s later.
  // NOTE: restarted from this thread: redis-server gets SIGTERM when its forking thread ends.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  server_->kill9();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  server_->restart(Deadline::after_seconds(15));
  serve(worker_q, worker_b, 0);
  trainer.join();
  EXPECT_EQ(error, "") << "the trainer did not ride through a 1 s Redis restart";
  EXPECT_EQ(got.size(), 4u);
  EXPECT_EQ(ctl.report(soon()).lost, 0);
}

}  // namespace
}  // namespace moerl::runtime
