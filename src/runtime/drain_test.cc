// Drain and Spot: the DrainController state machine, the IMDSv2 watcher against a fake
// metadata endpoint, and the worker loop draining under SIGTERM (a forked worker process on
// Redis) and under a Spot notice (threads, in-process queue).
#include "runtime/drain.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <thread>

#include "base/error.h"
#include "base/subprocess.h"
#include "runtime/in_process_queue.h"
#include "runtime/redis_queue.h"
#include "runtime/spot_watcher.h"
#include "runtime/test_metadata_server.h"
#include "runtime/test_records.h"
#include "runtime/test_redis.h"
#include "runtime/worker_loop.h"

namespace moerl::runtime {
namespace {

Deadline soon() { return Deadline::after_seconds(10); }

// A fake generation: each task of the batch in turn takes `steps` decode steps of `step_ms`;
// when told to abort, the unfinished tasks are handed back.
ProcessBatchFn fake_generation(int steps, int step_ms, std::atomic<int>* aborted = nullptr) {
  return [=](const std::vector<Lease>& leases, const WorkContext& ctx) {
    std::vector<std::optional<ExperienceRecord>> out(leases.size());
    for (size_t i = 0; i < leases.size(); ++i) {
      for (int s = 0; s < steps; ++s) {
        if (ctx.should_abort()) {
          if (aborted) ++*aborted;
          return out;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
      }
      out[i] = record_for(leases[i].task, "", 1);
    }
    return out;
  };
}

TEST(Drain, StateMachine) {
  DrainController d(0.5);
  EXPECT_EQ(d.state(), DrainState::kRunning);
  EXPECT_TRUE(d.accepting_tasks());
  EXPECT_TRUE(d.fits(1e6));
  EXPECT_GT(d.remaining_seconds(), 1e9);
  d.request_drain("test");
  d.request_drain("second reason is ignored");
  EXPECT_EQ(d.state(), DrainState::kDraining);
  EXPECT_EQ(d.reason(), "test");
  EXPECT_FALSE(d.accepting_tasks());
  EXPECT_NEAR(d.remaining_seconds(), 0.5, 0.1);
  EXPECT_TRUE(d.fits(0.2));
  EXPECT_FALSE(d.fits(0.7));
  std::this_thread::sleep_for(std::chrono::milliseconds(550));
  EXPECT_TRUE(d.deadline().expired());
  d.mark_drained();
  EXPECT_EQ(d.state(), DrainState::kDrained);
  EXPECT_THROW(DrainController(0), Error);
}

TEST(Drain, SigtermStartsDrainAtSignalTime) {
  DrainController d(5);
  DrainController::install_signal_handlers(&d);
  ASSERT_EQ(raise(SIGTERM), 0);  // handled: the test process must survive
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(d.state(), DrainState::kDraining);
  EXPECT_EQ(d.reason(), "SIGTERM");
  // The deadline counts from the signal, not from when state() noticed it.
  EXPECT_NEAR(d.remaining_seconds(), 4.8, 0.15);
  DrainController::install_signal_handlers(nullptr);
}

TEST(Spot, TokenFlowNoticeAndErrors) {
  FakeMetadataServer md;
  SpotWatcher w({.metadata_url = md.url() + "/", .poll_seconds = 0.05}, [](const SpotNotice&) {});
  EXPECT_FALSE(w.poll_once().has_value());
  EXPECT_FALSE(w.poll_once().has_value());
  EXPECT_EQ(md.puts(), 1) << "the token must be reused within its TTL";
  EXPECT_EQ(md.gets(), 2);
  EXPECT_EQ(md.last_ttl_header(), "seen");
  EXPECT_TRUE(w.last_error().empty()) << w.last_error();
  md.revoke_tokens();  // 401 -> a fresh token, same poll
  EXPECT_FALSE(w.poll_once().has_value());
  EXPECT_EQ(md.puts(), 2);
  EXPECT_EQ(md.unauthorized(), 1);
  md.set_notice(true);
  auto n = w.poll_once();
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->action, "terminate");
  EXPECT_EQ(n->time, "2026-11-29T08:00:00Z");

  SpotWatcher off({.metadata_url = "http://127.0.0.1:" + std::to_string(pick_free_loopback_port()),
                   .request_timeout_seconds = 0.5},
                  [](const SpotNotice&) {});
  EXPECT_FALSE(off.poll_once().has_value());
  EXPECT_NE(off.last_error().find("token PUT"), std::string::npos) << off.last_error();
  EXPECT_THROW(SpotWatcher({.metadata_url = "ftp://x"}, [](const SpotNotice&) {}), Error);
  EXPECT_THROW(SpotWatcher({.poll_seconds = 0}, [](const SpotNotice&) {}), Error);
}

TEST(WorkerLoop, CompletesTasksAndRenewsLongOnes) {
  InProcessTaskQueue q;
  InProcessExperienceBuffer b;
  DrainController drain(90);
  for (int i = 0; i < 6; ++i) q.enqueue(make_task("k" + std::to_string(i), i + 1), soon());
  // Each task takes 0.25 s, longer than the 0.15 s lease: only renewal keeps it.
  WorkerLoopConfig cfg{.worker_id = "w", .tasks_per_lease = 2, .lease_seconds = 0.15,
                       .renew_seconds = 0.04, .poll_seconds = 0.2, .max_tasks = 6};
  Accounting acc;
  WorkerLoopResult r = run_worker_loop(cfg, q, b, drain, fake_generation(5, 50), &acc);
  EXPECT_EQ(r.completed, 6);
  EXPECT_EQ(r.lost_leases, 0);
  EXPECT_EQ(r.handed_back, 0);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(q.depth(soon()).queued(), 0);
  EXPECT_EQ(q.stats().requeued, 0) << "a renewed lease must never be re-delivered";
  auto recs = b.take(6, soon());
  ASSERT_EQ(recs.size(), 6u);
  EXPECT_EQ(recs[0].worker_id, "w");
  EXPECT_EQ(recs[0].cursor, 1u);
  EXPECT_GT(recs[0].leased_unix_ms, 0);
  EXPECT_GE(recs[0].finished_unix_ms, recs[0].leased_unix_ms);
  EXPECT_EQ(acc.get(Counter::kSamplesGenerated), 12);
  EXPECT_THROW(run_worker_loop(WorkerLoopConfig{}, q, b, drain, fake_generation(1, 1)), Error);
}

// A Spot notice from the (fake) metadata endpoint drains the worker: it finishes what fits,
// hands the rest back at once and returns exit code 0 within the drain deadline.
TEST(WorkerLoop, SpotNoticeDrains) {
  FakeMetadataServer md;
  InProcessTaskQueue q;
  InProcessExperienceBuffer b;
  const int kTasks = 12;
  for (int i = 0; i < kTasks; ++i) q.enqueue(make_task("s" + std::to_string(i), i), soon());
  DrainController drain(1.0);
  SpotWatcher spot({.metadata_url = md.url(), .poll_seconds = 0.05},
                   [&](const SpotNotice& n) { drain.request_drain("spot " + n.action); });
  spot.start();
  WorkerLoopConfig cfg{.worker_id = "spot-w", .tasks_per_lease = 8, .lease_seconds = 60,
                       .poll_seconds = 0.1, .drain_margin_seconds = 0.2};
  WorkerLoopResult r;
  std::thread worker([&] { r = run_worker_loop(cfg, q, b, drain, fake_generation(10, 30)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(450));
  md.set_notice(true);
  double t0 = now_seconds();
  worker.join();
  double took = now_seconds() - t0;
  EXPECT_TRUE(spot.noticed());
  EXPECT_LT(took, 1.0 + 0.3) << "drain overran its deadline";
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.final_state, DrainState::kDrained);
  EXPECT_EQ(r.drain_reason, "spot terminate");
  EXPECT_GT(r.handed_back, 0);
  QueueDepth d = q.depth(soon());
  EXPECT_EQ(d.leased, 0) << "every unfinished task must be handed back";
  EXPECT_EQ(r.completed + d.ready, kTasks);
  EXPECT_EQ(static_cast<int64_t>(b.take(kTasks, Deadline::after_seconds(0.1)).size()), r.completed);
  // Handed-back tasks go to the next worker at once (lease time 60 s would otherwise apply).
  EXPECT_EQ(static_cast<int64_t>(q.lease("rescuer", kTasks, 60, Deadline::after_seconds(0.1)).size()), d.ready);
}

class DrainRedisTest : public RedisTest {};

// SIGTERM to a worker process (Redis queue) mid-task: it exits 0 within the drain deadline,
// having put what it finished and handed back the rest, which another worker gets at once.
TEST_F(DrainRedisTest, SigtermDrainsWorkerProcess) {
  const int kTasks = 12;
  const double kDrainSeconds = 1.5;
  RedisUrl url = parse_redis_url(url_);
  RedisTaskQueue q(url, "drain");
  for (int i = 0; i < kTasks; ++i) q.enqueue(make_task("d" + std::to_string(i), i), soon());
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a crashed test
    int code = 5;
    try {
      RedisTaskQueue wq(url, "drain");
      RedisExperienceBuffer wb(url, "drain");
      DrainController drain(kDrainSeconds);
      DrainController::install_signal_handlers(&drain);
      WorkerLoopConfig cfg{.worker_id = "victim", .tasks_per_lease = 4, .lease_seconds = 60,
                           .poll_seconds = 0.2, .drain_margin_seconds = 0.3};
      WorkerLoopResult r = run_worker_loop(cfg, wq, wb, drain, fake_generation(10, 40));
      code = (r.exit_code == 0 && r.final_state == DrainState::kDrained) ? 0 : 3;
    } catch (...) {
      code = 4;
    }
    _exit(code);
  }
  Subprocess worker = Subprocess::adopt(pid, "victim");  // NOTE: fork without exec (test code)
  RedisExperienceBuffer trainer(url, "drain");
  std::vector<ExperienceRecord> got;
  Deadline first = Deadline::after_seconds(20);
  while (got.size() < 2 && !first.expired()) {
    for (auto& r : trainer.take(1, Deadline::after_seconds(0.5))) got.push_back(r);
  }
  ASSERT_GE(got.size(), 2u) << "the worker never produced experience";
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // mid-task
  ASSERT_TRUE(worker.signal(SIGTERM));
  double t0 = now_seconds();
  std::optional<int> status = worker.wait_for(Deadline::after_seconds(kDrainSeconds + 5));
  double took = now_seconds() - t0;
  ASSERT_TRUE(status && !worker.killed_by_signal()) << "worker did not exit (status " << status.value_or(-1) << ")";
  EXPECT_EQ(*status, 0);
  // Slack for process exit and this poll loop on a loaded 2-core box.
  EXPECT_LT(took, kDrainSeconds + 1.0) << "drain overran its deadline";
  for (auto& r : trainer.take(kTasks, Deadline::after_seconds(0.3))) got.push_back(r);
  QueueDepth d = q.depth(soon());
  EXPECT_EQ(d.leased, 0) << "the drained worker still holds leases";
  EXPECT_GT(d.ready, 0);
  EXPECT_EQ(static_cast<int64_t>(got.size()) + d.ready, kTasks) << "a task was lost or duplicated";
  double t1 = now_seconds();
  auto rescued = q.lease("rescuer", kTasks, 60, Deadline::after_seconds(2));
  EXPECT_EQ(static_cast<int64_t>(rescued.size()), d.ready);
  EXPECT_LT(now_seconds() - t1, 1.0) << "handed-back tasks must be available at once";
}

}  // namespace
}  // namespace moerl::runtime
