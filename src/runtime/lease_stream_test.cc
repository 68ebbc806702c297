// LeaseStream, the streaming worker's lease handling, on the in-process queue and buffer:
// leases taken a few at a time are put and acked as their records come (in any order), what
// is held when generation is abandoned is handed back for the next worker, max_tasks caps
// what is taken, a draining stream takes nothing, and a record no lease is for is an error.
#include "runtime/lease_stream.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "base/error.h"
#include "runtime/in_process_queue.h"
#include "runtime/test_records.h"

namespace moerl::runtime {
namespace {

Deadline soon() { return Deadline::after_seconds(10); }

void enqueue_tasks(InProcessTaskQueue& q, int n) {
  for (int i = 0; i < n; ++i) q.enqueue(make_task("s" + std::to_string(i), static_cast<uint64_t>(i + 1)), soon());
}

TEST(LeaseStream, RecordsArePutAndAckedAsTheyComeAndTheRestHandedBack) {
  InProcessTaskQueue q;
  InProcessExperienceBuffer b;
  DrainController drain(60);
  enqueue_tasks(q, 5);
  Accounting acc;
  LeaseStream s({.worker_id = "sw", .tasks_per_lease = 4}, q, b, drain, &acc);
  std::vector<Lease> first = s.take(2, 1.0), more = s.take(2, 1.0);
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(more.size(), 2u);
  EXPECT_EQ(s.held(), 4);
  // Out of order, with the cursor left for the stream to fill in from the lease.
  ExperienceRecord r = record_for(more[0].task, "", 1);
  r.cursor = 0;
  s.complete(r);
  s.complete(record_for(first[1].task, "", 1));
  EXPECT_EQ(s.held(), 2);
  s.hand_back_all();  // generation abandoned: first[0] and more[1] go back
  EXPECT_EQ(s.held(), 0);
  const WorkerLoopResult res = s.finish();
  EXPECT_EQ(res.completed, 2);
  EXPECT_EQ(res.handed_back, 2);
  EXPECT_EQ(res.lost_leases, 0);
  EXPECT_EQ(q.stats().acked, 2);
  std::vector<ExperienceRecord> got = b.take(2, soon());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].task_id, more[0].task.task_id);
  EXPECT_EQ(got[0].cursor, more[0].task.cursor) << "the cursor comes from the lease";
  EXPECT_EQ(got[0].worker_id, "sw");
  EXPECT_EQ(got[1].task_id, first[1].task.task_id);
  EXPECT_EQ(acc.get(Counter::kTasksRequeued), 2);
  // The handed-back tasks and the one never taken are there for the next worker.
  std::vector<Lease> next = q.lease("other", 10, 30, soon());
  std::vector<std::string> ids;
  for (const Lease& l : next) ids.push_back(l.task.task_id);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::string>{first[0].task.task_id, more[1].task.task_id, "s4"}));
}

TEST(LeaseStream, MaxTasksCapsWhatIsTakenAndADrainTakesNothing) {
  InProcessTaskQueue q;
  InProcessExperienceBuffer b;
  DrainController drain(60);
  enqueue_tasks(q, 6);
  LeaseStream s({.worker_id = "sw", .tasks_per_lease = 4, .max_tasks = 3}, q, b, drain);
  EXPECT_EQ(s.take(2, 1.0).size(), 2u);
  EXPECT_FALSE(s.exhausted());
  EXPECT_EQ(s.take(4, 1.0).size(), 1u);
  EXPECT_TRUE(s.exhausted());
  EXPECT_TRUE(s.take(4, 0.05).empty());
  LeaseStream d({.worker_id = "dw", .tasks_per_lease = 4}, q, b, drain);
  drain.request_drain("test");
  EXPECT_TRUE(d.take(4, 0.05).empty()) << "a draining worker takes no new work";
  EXPECT_EQ(d.finish().final_state, DrainState::kDrained);
}

TEST(LeaseStream, ARecordNoHeldLeaseIsForIsAnInternalError) {
  InProcessTaskQueue q;
  InProcessExperienceBuffer b;
  DrainController drain(60);
  enqueue_tasks(q, 1);
  LeaseStream s({.worker_id = "sw"}, q, b, drain);
  std::vector<Lease> l = s.take(1, 1.0);
  ASSERT_EQ(l.size(), 1u);
  TaskUnit other = l[0].task;
  other.attempt += 1;  // the same task, another delivery
  try {
    s.complete(record_for(other, "", 1));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
    EXPECT_NE(std::string(e.what()).find("which no lease it holds is for"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s.held(), 1) << "the lease is still held";
  s.finish();  // hands it back
  EXPECT_EQ(q.lease("other", 1, 30, soon()).size(), 1u);
}

}  // namespace
}  // namespace moerl::runtime
