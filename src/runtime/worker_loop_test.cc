// The worker loop's batch contract on the in-process queue: one process() call per leased
// batch, one answer per lease (nullopt hands that task back), and a malformed answer
// (wrong size, a record for another task) is an Error that hands the whole batch back.
// Drain, Spot and renewal behaviour are in drain_test.cc; process kills in chaos_test.cc.
#include "runtime/worker_loop.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>

#include "base/error.h"
#include "runtime/in_process_queue.h"
#include "runtime/test_records.h"

namespace moerl::runtime {
namespace {

Deadline soon() { return Deadline::after_seconds(10); }

// Tasks b0..b{n-1} with cursor i + 1 and group size i + 1, so each record's sample count
// and cursor identify its task.
void enqueue_tasks(InProcessTaskQueue& q, int n) {
  for (int i = 0; i < n; ++i) {
    TaskUnit t = make_task("b" + std::to_string(i), static_cast<uint64_t>(i + 1));
    t.group_size = static_cast<uint32_t>(i + 1);
    q.enqueue(t, soon());
  }
}

// A record with only attempt and samples set: the loop fills task_id, worker_id, cursor and
// the timestamps from the lease.
ExperienceRecord bare_record(const TaskUnit& t) {
  ExperienceRecord r = record_for(t, "", 1);
  r.task_id.clear();
  r.cursor = 0;
  return r;
}

// The code of the moerl::Error `fn` throws; nullopt if it throws none.
std::optional<ErrorCode> code_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.code();
  }
  return std::nullopt;
}

TEST(WorkerLoop, BatchNulloptIsHandedBackTheRestPutAndAcked) {
  InProcessTaskQueue q;
  InProcessExperienceBuffer b;
  DrainController drain(60);
  enqueue_tasks(q, 3);
  WorkerLoopConfig cfg{.worker_id = "bw", .tasks_per_lease = 3, .poll_seconds = 0.2};
  Accounting acc;
  std::vector<std::string> seen;
  int calls = 0;
  WorkerLoopResult r = run_worker_loop(cfg, q, b, drain,
      [&](const std::vector<Lease>& leases, const WorkContext& ctx) {
        ++calls;
        for (const Lease& l : leases) seen.push_back(l.task.task_id);
        drain.request_drain("one batch only");  // the loop finishes this batch, then stops
        EXPECT_TRUE(ctx.draining());
        std::vector<std::optional<ExperienceRecord>> out;
        for (const Lease& l : leases) {
          if (l.task.task_id == "b1") out.push_back(std::nullopt);
          else out.push_back(bare_record(l.task));
        }
        return out;
      }, &acc);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, (std::vector<std::string>{"b0", "b1", "b2"})) << "one call for the whole lease";
  EXPECT_EQ(r.completed, 2);
  EXPECT_EQ(r.handed_back, 1);
  EXPECT_EQ(r.lost_leases, 0);
  EXPECT_EQ(r.final_state, DrainState::kDrained);
  EXPECT_EQ(acc.get(Counter::kSamplesGenerated), 1 + 3);  // group sizes of b0 and b2
  EXPECT_EQ(q.stats().acked, 2);
  EXPECT_EQ(q.stats().requeued, 1);

  std::vector<ExperienceRecord> recs = b.take(3, Deadline::after_seconds(0.2));
  ASSERT_EQ(recs.size(), 2u);
  for (const ExperienceRecord& rec : recs) {
    uint64_t k = rec.task_id == "b0" ? 0 : 2;
    EXPECT_EQ(rec.task_id, "b" + std::to_string(k));
    EXPECT_EQ(rec.worker_id, "bw");
    EXPECT_EQ(rec.cursor, k + 1);
    EXPECT_EQ(rec.samples.size(), k + 1);
    EXPECT_GT(rec.leased_unix_ms, 0);
    EXPECT_GE(rec.finished_unix_ms, rec.leased_unix_ms);
  }
  QueueDepth d = q.depth(soon());
  EXPECT_EQ(d.ready, 1);
  EXPECT_EQ(d.leased, 0);
  std::vector<Lease> again = q.lease("next", 3, 60, Deadline::after_seconds(0.2));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].task.task_id, "b1");
  EXPECT_EQ(again[0].delivery_count, 2u);
}

TEST(WorkerLoop, MalformedBatchAnswerThrowsAndHandsBackEveryLease) {
  WorkerLoopConfig cfg{.worker_id = "bw", .tasks_per_lease = 3, .poll_seconds = 0.2};
  struct Case {
    const char* what;
    ProcessBatchFn process;
  };
  std::vector<Case> cases = {
      {"two entries for three leases",
       [](const std::vector<Lease>& leases, const WorkContext&) {
         return std::vector<std::optional<ExperienceRecord>>{bare_record(leases[0].task),
                                                             bare_record(leases[1].task)};
       }},
      {"a record for another task's lease",
       [](const std::vector<Lease>& leases, const WorkContext&) {
         std::vector<std::optional<ExperienceRecord>> out;
         for (const Lease& l : leases) out.push_back(bare_record(l.task));
         out[1]->attempt = leases[1].task.attempt + 1;
         return out;
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    InProcessTaskQueue q;
    InProcessExperienceBuffer b;
    DrainController drain(60);
    enqueue_tasks(q, 3);
    std::optional<ErrorCode> code = code_of([&] { run_worker_loop(cfg, q, b, drain, c.process); });
    ASSERT_TRUE(code.has_value()) << "a malformed answer must throw";
    EXPECT_EQ(*code, ErrorCode::kInternal);
    QueueDepth d = q.depth(soon());
    EXPECT_EQ(d.ready, 3) << "every lease of the batch must be handed back";
    EXPECT_EQ(d.leased, 0);
    EXPECT_EQ(q.stats().requeued, 3);
    EXPECT_EQ(q.stats().acked, 0);
    EXPECT_TRUE(b.take(3, Deadline::after_seconds(0.1)).empty()) << "nothing of a bad batch is put";
  }
}

}  // namespace
}  // namespace moerl::runtime
