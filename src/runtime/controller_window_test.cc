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

// One trainer process: its in-process queue and buffer, and the controller over them.
struct Life {
  explicit Life(ControllerConfig cfg, QueueOptions queue = {}) : q(queue), ctl(cfg, q, b, task_at, &acc) {}
  InProcessTaskQueue q;
  InProcessExperienceBuffer b;
  Accounting acc;
  AsyncController ctl;

  // Generates every task it can lease (version 0), except those `fail` names (nacked), then
  // trains one batch into `trained`, expecting no task twice.
  void step(std::set<std::string>& trained, const std::string& fail = "") {
    for (Lease& l : q.lease("w", 4, 30, Deadline::after_seconds(0.05))) {
      if (l.task.task_id == fail) {
        ASSERT_TRUE(q.nack(l, soon()));
        continue;
      }
      b.put(record_for(l.task, "w", 0), soon());
      ASSERT_TRUE(q.ack(l, soon()));
    }
    for (auto& r : ctl.next_batch(4, 0, Deadline::after_seconds(0.3))) {
      EXPECT_TRUE(trained.insert(r.task_id).second) << "trained twice: " << r.task_id;
    }
  }
  // Steps until the controller is finished (60 s at most); returns the most dedupe keys the
  // buffer held after any step.
  size_t run_to_end(std::set<std::string>& trained, const std::string& fail = "") {
    size_t most = 0;
    for (Deadline end = Deadline::after_seconds(60); !ctl.finished(soon()) && !end.expired();) {
      step(trained, fail);
      most = std::max(most, b.snapshot().seen.size());
    }
    return most;
  }
};

TEST(ControllerDedupeWindow, KeysStayBoundedByTheTasksInFlight) {
  Life life({.total_tasks = 300, .queue_ahead = 8, .first_cursor = 50});
  std::set<std::string> trained;
  const size_t most = life.run_to_end(trained);
  EXPECT_EQ(trained.size(), 300u);
  EXPECT_LE(most, 16u) << "the dedupe set grows with the run instead of the tasks in flight";
  BufferSnapshot s = life.b.snapshot();
  EXPECT_EQ(s.settled_below, 350u);
  EXPECT_TRUE(s.seen.empty());
  EXPECT_EQ(life.ctl.report(soon()).lost, 0);
}

// A zombie worker's copy of a task trained long ago (its key forgotten) is a duplicate, in
// this life and in the next one restored from a checkpoint, whatever attempt it claims.
TEST(ControllerDedupeWindow, ALateCopyOfASettledTaskIsDroppedAcrossARestart) {
  const ControllerConfig cfg{.total_tasks = 40, .queue_ahead = 4};
  std::set<std::string> trained;
  BufferSnapshot checkpoint;
  {
    Life first(cfg);
    while (trained.size() < 20) first.step(trained);
    ASSERT_EQ(first.b.snapshot().seen.count("q3#0"), 0u) << "task 3's key should be forgotten by now";
    first.b.put(record_for(task_at(3, 0), "zombie", 0), soon());
    const int64_t dups = first.b.stats().duplicates_dropped;
    first.step(trained);
    EXPECT_EQ(first.b.stats().duplicates_dropped, dups + 1);
    checkpoint = BufferSnapshot::decode(first.ctl.snapshot().encode());
  }
  EXPECT_GE(checkpoint.settled_below, 16u);
  Life second(cfg);
  second.ctl.restore(checkpoint, soon());
  second.b.put(record_for(task_at(5, 0), "zombie", 0), soon());
  second.b.put(record_for(task_at(5, 1), "zombie", 0), soon());
  second.run_to_end(trained);
  EXPECT_EQ(trained.size(), 40u);
  EXPECT_EQ(second.ctl.report(soon()).lost, 0);
}

// A dead-lettered task is settled too, so one task that never succeeds does not hold the
// watermark (and with it every later key) for the rest of the run.
TEST(ControllerDedupeWindow, ADeadLetteredTaskDoesNotHoldTheWatermark) {
  Life life({.total_tasks = 30, .queue_ahead = 4}, QueueOptions{.max_deliveries = 1});
  std::set<std::string> trained;
  life.run_to_end(trained, /*fail=*/"q2");  // its one delivery fails: dead-lettered
  EXPECT_EQ(trained.size(), 29u);
  EXPECT_EQ(life.q.depth(soon()).dead, 1);
  EXPECT_EQ(life.b.snapshot().settled_below, 30u) << "the dead-lettered task 2 holds the watermark";
}

}  // namespace
}  // namespace moerl::runtime
