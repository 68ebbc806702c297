// Two trainers on one namespace, the way it happens in a cluster: a trainer freezes (SIGSTOP:
// a stalled node, a long pause) past its lease; a successor is started (same command, same
// shared store, its own run dir) and takes the namespace; then the frozen one wakes up. The
// woken trainer must stop with a clear error instead of publishing or checkpointing over its
// successor, and the successor finishes the run: lost = 0, every task trained exactly once.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "base/deadline.h"
#include "base/files.h"
#include "e2e/async_test_util.h"
#include "runtime/redis_server.h"

namespace moerl::train {
namespace {

TEST(AsyncFence, AFrozenTrainerReplacedBySuccessorStopsWhenItWakes) {
  if (testing::moerl_bin().empty()) GTEST_SKIP() << "MOERL_BIN is not set (run through ctest)";
  std::string dir = testing::make_temp_dir("async-fence");
  runtime::RedisServer server = runtime::RedisServer::start(dir + "/redis", Deadline::after_seconds(15));
  const int kSteps = 10, kPrompts = 4;
  const std::string runtime = testing::async_runtime_text(server.url(), "fence") + "trainer_lease_seconds = 2\n";
  std::string config = testing::write_config(
      dir, testing::tiny_config_text(runtime, "[store]\nuri = \"file://" + dir + "/store\"\n",
                                     {"rollout.prompts_per_step=" + std::to_string(kPrompts),
                                      "train.steps=" + std::to_string(kSteps), "train.eval_prompts=4",
                                      "train.threads=1"}));
  Subprocess first = testing::spawn_moerl({"trainer", config, "--run-dir", dir + "/a", "--no-plot"}, dir + "/a.log");
  Subprocess worker = testing::spawn_moerl({"rollout", config, "--run-dir", dir + "/w", "--worker-id", "w0"},
                                           dir + "/w0.log");
  for (Deadline d = Deadline::after_seconds(240); testing::rl_steps_done(dir + "/a/metrics.jsonl") < 2;
       std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
    ASSERT_FALSE(d.expired()) << testing::read_text(dir + "/a.log");
    int code = 0;
    ASSERT_FALSE(testing::exited(first, &code)) << "the first trainer ended before step 2 (" << code << ")";
  }
  first.signal(SIGSTOP);
  Subprocess second = testing::spawn_moerl({"trainer", config, "--run-dir", dir + "/b", "--no-plot"}, dir + "/b.log");
  for (Deadline d = Deadline::after_seconds(60);
       testing::read_text(dir + "/b.log").find("as epoch 2") == std::string::npos;
       std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    ASSERT_FALSE(d.expired()) << testing::read_text(dir + "/b.log");
  }
  first.signal(SIGCONT);
  const int first_code = testing::wait_exit(first, 60);
  const std::string a_log = testing::read_text(dir + "/a.log");
  EXPECT_NE(first_code, 0) << a_log;
  EXPECT_NE(a_log.find("lost runtime.namespace 'fence' (epoch 1)"), std::string::npos) << a_log;
  EXPECT_EQ(a_log.find("train: done"), std::string::npos) << a_log;

  ASSERT_EQ(testing::wait_exit(second, 240), 0) << testing::read_text(dir + "/b.log");
  testing::expect_each_task_trained_once(dir + "/b", kSteps, kSteps * kPrompts);
  worker.signal(SIGTERM);
  testing::wait_exit(worker, 30);
  if (HasFailure()) {  // keep the logs of a failure, and show what CI would otherwise lose
    ADD_FAILURE() << "logs kept in " << dir << "\n" << testing::log_tail(dir + "/b.log", 6000)
                  << testing::log_tail(dir + "/a.log", 3000) << testing::log_tail(dir + "/w0.log", 3000);
    return;
  }
  remove_tree(dir);
}

}  // namespace
}  // namespace moerl::train
