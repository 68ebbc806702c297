// A Redis that lost its last writes (SIGKILLed and restarted from an older copy of its AOF,
// as `appendfsync everysec` allows): the tasks the controller enqueued after that copy, and
// the producer cursor with them, are gone. The controller sees the producer cursor fall
// behind what the queue had confirmed and creates those tasks again: the run finishes with
// every task trained once and lost = 0 (it used to wait for tasks that no longer existed).
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "base/files.h"
#include "runtime/controller.h"
#include "runtime/redis_queue.h"
#include "runtime/redis_server.h"
#include "runtime/test_records.h"

namespace moerl::runtime {
namespace {

namespace fs = std::filesystem;

Deadline soon() { return Deadline::after_seconds(10); }

TaskUnit task_at(uint64_t cursor, uint32_t attempt) { return make_task("q" + std::to_string(cursor), cursor, attempt); }

int serve(TaskQueue& q, ExperienceBuffer& b) {
  int n = 0;
  for (auto leases = q.lease("w", 4, 30, Deadline::after_seconds(0.05)); !leases.empty();
       leases = q.lease("w", 4, 30, Deadline::after_seconds(0.05))) {
    for (Lease& l : leases) {
      b.put(record_for(l.task, "w", 0), soon());
      EXPECT_TRUE(q.ack(l, soon()));
      ++n;
    }
  }
  return n;
}

TEST(ControllerLostWrites, TasksARestartedRedisForgotAreCreatedAgain) {
  const std::string dir = fs::temp_directory_path() / ("moerl-lost-writes-" + std::to_string(::getpid()));
  remove_tree(dir);
  RedisServer server = RedisServer::start(dir + "/redis", soon());
  const RedisUrl url = parse_redis_url(server.url());
  RedisTaskQueue q(url, "lw"), worker_q(url, "lw");
  RedisExperienceBuffer b(url, "lw"), worker_b(url, "lw");
  Accounting acc;
  AsyncController ctl({.total_tasks = 12, .queue_ahead = 4}, q, b, task_at, &acc);
  b.restore(BufferSnapshot{}, soon());
  std::set<std::string> trained;
  ctl.top_up(soon());  // q0..q3
  serve(worker_q, worker_b);
  for (auto& r : ctl.next_batch(4, 0, soon())) trained.insert(r.task_id);
  ASSERT_EQ(trained.size(), 4u);
  ctl.top_up(soon());  // q4..q7: then the AOF is copied, as far as it got
  fs::copy(dir + "/redis", dir + "/aof-copy", fs::copy_options::recursive);
  ctl.top_up(soon());
  serve(worker_q, worker_b);  // q4..q7 generated and acked ...
  for (auto& r : ctl.next_batch(4, 0, soon())) trained.insert(r.task_id);
  ctl.top_up(soon());  // ... q8..q11 enqueued: writes the copy does not have
  ASSERT_EQ(ctl.data_cursor(), 12u);
  server.kill9();
  remove_tree(dir + "/redis");
  fs::rename(dir + "/aof-copy", dir + "/redis");
  server.restart(Deadline::after_seconds(30));
  ASSERT_EQ(q.producer_cursor(soon()), 8u) << "the restarted server should have lost q8..q11";

  for (Deadline end = Deadline::after_seconds(30); !ctl.finished(soon()) && !end.expired();) {
    serve(worker_q, worker_b);
    for (auto& r : ctl.next_batch(4, 0, Deadline::after_seconds(0.5))) {
      EXPECT_TRUE(trained.insert(r.task_id).second) << "trained twice: " << r.task_id;
    }
  }
  EXPECT_EQ(trained.size(), 12u);
  AccountingReport rep = ctl.report(soon());
  EXPECT_EQ(rep.lost, 0) << rep.to_json().dump();
  EXPECT_EQ(rep.get(Counter::kTasksCreated), 12);
  server.stop();
  remove_tree(dir);
}

}  // namespace
}  // namespace moerl::runtime
