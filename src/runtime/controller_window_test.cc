// The trainer's dedupe memory is bounded by the tasks in flight, not by the run's length:
// settled tasks' keys are forgotten (ExperienceBuffer::settle_below), and late copies of
// them are still dropped, before and after a restart.
#include <gtest/gtest.h>

#include <set>

#include "runtime/controller.h"
#include "runtime/in_process_queue.h"
#include "runtime/test_records.h"

namespace moerl::runtime {
namespace {

Deadline soon() { return Deadline::after_seconds(10); }

TaskUnit task_at(uint64_t cursor, uint32_t attempt) { return make_task("q" + std::to_string(cursor), cursor, attempt); }

// Serves every task it can lease (version 0) and trains until `ctl` is finished; returns the
// most dedupe keys the buffer held at any step.
size_t run_to_end(AsyncController& ctl, TaskQueue& q, ExperienceBuffer& b, std::set<std::string>& trained) {
  size_t most = 0;
  Deadline end = Deadline::after_seconds(60);
  while (!ctl.finished(soon()) && !end.expired()) {
    for (Lease& l : q.lease("w", 4, 30, Deadline::after_seconds(0.05))) {
      b.put(record_for(l.task, "w", 0), soon());
      EXPECT_TRUE(q.ack(l, soon()));
    }
    for (auto& r : ctl.next_batch(4, 0, Deadline::after_seconds(0.5))) {
      EXPECT_TRUE(trained.insert(r.task_id).second) << "trained twice: " << r.task_id;
    }
    most = std::max(most, b.snapshot().seen.size());
  }
  return most;
}

TEST(ControllerDedupeWindow, KeysStayBoundedByTheTasksInFlight) {
  InProcessTaskQueue q;
  InProcessExperienceBuffer b;
  Accounting acc;
  AsyncController ctl({.total_tasks = 300, .queue_ahead = 8, .first_cursor = 50}, q, b, task_at, &acc);
  std::set<std::string> trained;
  const size_t most = run_to_end(ctl, q, b, trained);
  EXPECT_EQ(trained.size(), 300u);
  EXPECT_LE(most, 16u) << "the dedupe set grows with the run instead of the tasks in flight";
  BufferSnapshot s = b.snapshot();
  EXPECT_EQ(s.settled_below, 350u);
  EXPECT_TRUE(s.seen.empty());
  EXPECT_EQ(ctl.report(soon()).lost, 0);
}

// A zombie worker's copy of a task trained long ago (its key forgotten) is a duplicate, in
// this life and in the next one restored from a checkpoint.
TEST(ControllerDedupeWindow, ALateCopyOfASettledTaskIsDroppedAcrossARestart) {
  ControllerConfig cfg{.total_tasks = 40, .queue_ahead = 4};
  std::set<std::string> trained;
  BufferSnapshot checkpoint;
  {
    InProcessTaskQueue q;
    InProcessExperienceBuffer b;
    Accounting acc;
    AsyncController ctl(cfg, q, b, task_at, &acc);
    while (trained.size() < 20) {
      for (Lease& l : q.lease("w", 4, 30, Deadline::after_seconds(0.05))) {
        b.put(record_for(l.task, "w", 0), soon());
        ASSERT_TRUE(q.ack(l, soon()));
      }
      for (auto& r : ctl.next_batch(4, 0, Deadline::after_seconds(0.5))) trained.insert(r.task_id);
    }
    ASSERT_TRUE(b.snapshot().seen.count("q3#0") == 0) << "task 3's key should be forgotten by now";
    b.put(record_for(task_at(3, 0), "zombie", 0), soon());
    const int64_t dups = b.stats().duplicates_dropped;
    for (auto& r : ctl.next_batch(4, 0, Deadline::after_seconds(0.5))) {
      EXPECT_NE(r.task_id, "q3") << "a settled task trained twice";
      trained.insert(r.task_id);
    }
    EXPECT_EQ(b.stats().duplicates_dropped, dups + 1);
    checkpoint = BufferSnapshot::decode(ctl.snapshot().encode());
  }
  EXPECT_GE(checkpoint.settled_below, 16u);
  InProcessTaskQueue q;
  InProcessExperienceBuffer b;
  Accounting acc;
  AsyncController ctl(cfg, q, b, task_at, &acc);
  ctl.restore(checkpoint, soon());
  b.put(record_for(task_at(5, 0), "zombie", 0), soon());
  b.put(record_for(task_at(5, 1), "zombie", 0), soon());
  run_to_end(ctl, q, b, trained);
  EXPECT_EQ(trained.size(), 40u);
  EXPECT_EQ(ctl.report(soon()).lost, 0);
}

// A dead-lettered task is settled too, so one task that never succeeds does not hold the
// watermark (and with it every later key) for the rest of the run.
TEST(ControllerDedupeWindow, ADeadLetteredTaskDoesNotHoldTheWatermark) {
  InProcessTaskQueue q(QueueOptions{.max_deliveries = 1});
  InProcessExperienceBuffer b;
  Accounting acc;
  AsyncController ctl({.total_tasks = 30, .queue_ahead = 4}, q, b, task_at, &acc);
  std::set<std::string> trained;
  Deadline end = Deadline::after_seconds(60);
  while (!ctl.finished(soon()) && !end.expired()) {
    for (Lease& l : q.lease("w", 4, 30, Deadline::after_seconds(0.05))) {
      if (l.task.task_id == "q2") {
        ASSERT_TRUE(q.nack(l, soon()));  // its one delivery fails: dead-lettered
        continue;
      }
      b.put(record_for(l.task, "w", 0), soon());
      ASSERT_TRUE(q.ack(l, soon()));
    }
    for (auto& r : ctl.next_batch(4, 0, Deadline::after_seconds(0.3))) trained.insert(r.task_id);
  }
  EXPECT_EQ(trained.size(), 29u);
  EXPECT_EQ(q.depth(soon()).dead, 1);
  EXPECT_EQ(b.snapshot().settled_below, 30u) << "the dead-lettered task 2 holds the watermark";
}

}  // namespace
}  // namespace moerl::runtime
