// AsyncController with a version lineage: records generated with versions outside it (a
// trainer life that died after its last checkpoint) are dropped, counted, and their tasks
// enqueued again under the next attempt, so every task is still trained exactly once.
#include <gtest/gtest.h>

#include <set>

#include "runtime/controller.h"
#include "runtime/in_process_queue.h"
#include "runtime/test_records.h"

namespace moerl::runtime {
namespace {

Deadline soon() { return Deadline::after_seconds(10); }

TaskUnit task_at(uint64_t cursor, uint32_t attempt) { return make_task("q" + std::to_string(cursor), cursor, attempt); }

int serve(TaskQueue& q, ExperienceBuffer& b, uint64_t version) {
  int n = 0;
  for (auto leases = q.lease("w", 8, 30, Deadline::after_seconds(0.05)); !leases.empty();
       leases = q.lease("w", 8, 30, Deadline::after_seconds(0.05))) {
    for (Lease& l : leases) {
      b.put(record_for(l.task, "w", version), soon());
      EXPECT_TRUE(q.ack(l, soon()));
      ++n;
    }
  }
  return n;
}

TEST(ControllerLineage, RecordsOfALostLifeAreDroppedAndTheirTasksTrainedOnceOnOurWeights) {
  InProcessTaskQueue q;
  InProcessExperienceBuffer b;
  Accounting acc;
  // This life resumed from a checkpoint at version 2; the dead life published 3 and 4; ours
  // start at 5.
  VersionLineage lineage = VersionLineage::from_json(nlohmann::json::array({{0, 2}}), 2);
  lineage.begin(5);
  AsyncController ctl({.total_tasks = 4, .queue_ahead = 4, .stale = {.max_staleness = 8}, .lineage = &lineage}, q, b, task_at, &acc);
  ctl.top_up(soon());
  EXPECT_EQ(serve(q, b, 4), 4);  // generated with the dead life's weights
  EXPECT_TRUE(ctl.next_batch(4, 5, Deadline::after_seconds(0.3)).empty());
  EXPECT_EQ(acc.get(Counter::kDeadLineage), 4);
  EXPECT_EQ(acc.get(Counter::kTasksRequeued), 4);
  EXPECT_EQ(q.depth(soon()).ready, 4) << "the dropped records' tasks are enqueued again";
  EXPECT_EQ(serve(q, b, 2), 4);  // a version both lives share (the checkpoint's) is ours
  std::set<std::string> trained;
  for (const ExperienceRecord& r : ctl.next_batch(4, 5, soon())) {
    EXPECT_EQ(r.attempt, 1u) << r.task_id;
    EXPECT_TRUE(trained.insert(r.task_id).second) << r.task_id;
  }
  EXPECT_EQ(trained.size(), 4u);
  EXPECT_TRUE(ctl.finished(soon()));
  AccountingReport rep = ctl.report(soon());
  EXPECT_EQ(rep.lost, 0);
  EXPECT_EQ(rep.get(Counter::kTasksCompleted), 4);
  EXPECT_EQ(rep.to_json()["records_dead_lineage"], 4);
}

TEST(ControllerLineage, WithoutALineageEveryVersionIsTrusted) {
  InProcessTaskQueue q;
  InProcessExperienceBuffer b;
  Accounting acc;
  AsyncController ctl({.total_tasks = 2, .queue_ahead = 2}, q, b, task_at, &acc);
  ctl.top_up(soon());
  serve(q, b, 4);
  EXPECT_EQ(ctl.next_batch(2, 5, soon()).size(), 2u);
  EXPECT_EQ(acc.get(Counter::kDeadLineage), 0);
}

}  // namespace
}  // namespace moerl::runtime
