// Chaos test of the Redis queue + buffer alone: 3 forked worker processes run the worker
// loop; every ~0.4 s one is SIGKILLed and restarted (half the time under the same name, so
// it first takes back its own pending entries), one gets SIGTERM mid-run and must drain and
// exit 0, and the trainer (this process) crashes once and restores from its checkpoint.
// At the end every task is trained exactly once and accounting reports lost == 0.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <map>
#include <random>
#include <thread>

#include "base/subprocess.h"
#include "runtime/accounting.h"
#include "runtime/redis_queue.h"
#include "runtime/test_records.h"
#include "runtime/test_redis.h"
#include "runtime/worker_loop.h"

namespace moerl::runtime {
namespace {

constexpr const char* kNs = "chaos";

// NOTE: fork without exec: the child runs the worker loop of this test binary.
Subprocess spawn_worker(const RedisUrl& url, const std::string& name, unsigned seed) {
  pid_t pid = fork();
  if (pid != 0) return Subprocess::adopt(pid, "worker " + name);
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a crashed test
  int code = 5;
  try {
    RedisTaskQueue q(url, kNs, QueueOptions{.max_deliveries = 50});
    RedisExperienceBuffer b(url, kNs);
    DrainController drain(2.0);
    DrainController::install_signal_handlers(&drain);
    WorkerLoopConfig cfg{.worker_id = name, .tasks_per_lease = 2, .lease_seconds = 0.6,
                         .renew_seconds = 0.15, .poll_seconds = 0.2, .drain_margin_seconds = 0.3};
    std::mt19937 rng(seed);
    WorkerLoopResult r = run_worker_loop(cfg, q, b, drain,
        [&](const std::vector<Lease>& leases, const WorkContext& ctx) {
          std::vector<std::optional<ExperienceRecord>> out(leases.size());
          for (size_t i = 0; i < leases.size(); ++i) {
            int steps = 2 + static_cast<int>(rng() % 6);
            for (int s = 0; s < steps; ++s) {
              if (ctx.should_abort()) return out;  // unfinished tasks are handed back
              std::this_thread::sleep_for(std::chrono::milliseconds(5));
            }
            out[i] = record_for(leases[i].task, name, 1);
          }
          return out;
        });
    code = r.exit_code;
  } catch (...) {
    code = 4;
  }
  _exit(code);
}

// Exit code; -1 if still running after timeout_seconds (then SIGKILLed), -2 if a signal ended it.
int stop_worker(Subprocess& worker, int sig, double timeout_seconds) {
  worker.signal(sig);
  std::optional<int> status = worker.wait_or_kill(Deadline::after_seconds(timeout_seconds));
  if (!status) return -1;
  return worker.killed_by_signal() ? -2 : *status;
}

class ChaosTest : public RedisTest {};

TEST_F(ChaosTest, KillsAndRestartsLoseNothingAndTrainNothingTwice) {
  const int kTasks = 150;
  RedisUrl url = parse_redis_url(url_);
  Accounting acc;
  RedisTaskQueue queue(url, kNs, QueueOptions{.max_deliveries = 50});
  for (int i = 0; i < kTasks; ++i) queue.enqueue(make_task("x" + std::to_string(i), i), Deadline::after_seconds(10));
  acc.add(Counter::kTasksCreated, kTasks);

  std::mt19937 rng(2026);
  std::vector<Subprocess> workers(3);
  std::vector<int> generation(3, 0);
  auto name_of = [&](int slot) {
    // Odd generations reuse the previous name: a restarted pod with a stable name.
    return "w" + std::to_string(slot) + "-" + std::to_string(generation[slot] / 2);
  };
  for (int s = 0; s < 3; ++s) workers[s] = spawn_worker(url, name_of(s), rng());

  auto trainer = std::make_unique<RedisExperienceBuffer>(url, kNs);
  std::set<std::string> trained, trained_at_checkpoint;
  BufferSnapshot checkpoint;
  bool checkpointed = false, trainer_crashed = false, sigtermed = false;
  int kills = 0;
  double last_kill = now_seconds();
  Deadline end = Deadline::after_seconds(90);
  while ((static_cast<int>(trained.size()) < kTasks || kills < 4) && !end.expired()) {
    for (ExperienceRecord& r : trainer->take(8, Deadline::after_seconds(0.1))) {
      EXPECT_TRUE(trained.insert(r.task_id).second) << "trained twice: " << r.task_id;
    }
    if (!checkpointed && trained.size() >= kTasks / 4) {
      checkpoint = BufferSnapshot::decode(trainer->snapshot().encode());
      trained_at_checkpoint = trained;
      checkpointed = true;
    }
    if (checkpointed && !trainer_crashed && trained.size() >= kTasks / 2) {
      // Trainer crash: everything trained since the checkpoint is lost with the process.
      trainer.reset();
      trained = trained_at_checkpoint;
      trainer = std::make_unique<RedisExperienceBuffer>(url, kNs);
      trainer->restore(checkpoint, Deadline::after_seconds(10));
      trainer_crashed = true;
    }
    if (!sigtermed && trained.size() >= kTasks * 2 / 3) {
      int slot = static_cast<int>(rng() % 3);
      EXPECT_EQ(stop_worker(workers[slot], SIGTERM, 4.0), 0) << "SIGTERM drain must exit 0";
      ++generation[slot];
      workers[slot] = spawn_worker(url, name_of(slot), rng());
      sigtermed = true;
    }
    if (now_seconds() - last_kill > 0.4) {
      int slot = static_cast<int>(rng() % 3);
      stop_worker(workers[slot], SIGKILL, 2.0);
      ++kills;
      ++generation[slot];
      workers[slot] = spawn_worker(url, name_of(slot), rng());
      last_kill = now_seconds();
    }
  }
  EXPECT_EQ(static_cast<int>(trained.size()), kTasks);
  // Tasks whose worker died after put but before ack are redone; let the workers finish them.
  Deadline drained = Deadline::after_seconds(20);
  while (queue.depth(Deadline::after_seconds(5)).queued() > 0 && !drained.expired()) {
    for (ExperienceRecord& r : trainer->take(8, Deadline::after_seconds(0.1))) {
      ADD_FAILURE() << "a record passed dedupe after all tasks were trained: " << r.task_id;
    }
  }
  trainer->take(kTasks, Deadline::after_seconds(0.3));  // drop the last duplicates
  for (int s = 0; s < 3; ++s) EXPECT_EQ(stop_worker(workers[s], SIGTERM, 4.0), 0);

  QueueDepth depth = queue.depth(Deadline::after_seconds(5));
  acc.add(Counter::kTasksCompleted, static_cast<int64_t>(trained.size()));
  acc.add(Counter::kDeadLettered, depth.dead);
  acc.set(Counter::kDuplicatesDropped, trainer->stats().duplicates_dropped);
  AccountingReport report = acc.report(depth.queued());
  EXPECT_EQ(report.lost, 0) << report.to_json().dump();
  EXPECT_EQ(depth.dead, 0);
  EXPECT_TRUE(trainer_crashed);
  EXPECT_TRUE(sigtermed);
  EXPECT_GE(kills, 4);
  std::cerr << "chaos: " << kills << " SIGKILLs, " << report.get(Counter::kDuplicatesDropped)
            << " duplicates dropped, accounting " << report.to_json().dump() << "\n";
}

}  // namespace
}  // namespace moerl::runtime
