// A rollout worker that starts before its trainer, on a namespace whose weight registry still
// names an earlier run's version that this run's store does not hold (another run directory,
// or a version pruned since): it waits for a version it can load, the new trainer's first,
// within first_version_seconds. Before, it retried the stale version 20 times in 4 s and
// exited, and the trainer then waited for experience that never came.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "e2e/async_test_util.h"
#include "runtime/redis_server.h"

namespace moerl::train {
namespace {

TEST(AsyncStaleVersion, AWorkerStartedBeforeItsTrainerWaitsPastAnEarlierRunsVersion) {
  if (testing::moerl_bin().empty()) GTEST_SKIP() << "MOERL_BIN is not set (run through ctest)";
  std::string dir = testing::make_temp_dir("async-stale-version");
  runtime::RedisServer server = runtime::RedisServer::start(dir + "/redis", Deadline::after_seconds(15));
  const std::string config = testing::write_config(
      dir, testing::tiny_config_text(testing::async_runtime_text(server.url(), "stale"), "",
                                     {"rollout.prompts_per_step=4", "train.steps=2", "train.eval_prompts=4",
                                      "train.threads=1"}));
  // The earlier run, in its own run directory (its own store), to its end.
  Subprocess t1 = testing::spawn_moerl({"trainer", config, "--run-dir", dir + "/a", "--no-plot"}, dir + "/t1.log");
  Subprocess w1 = testing::spawn_moerl({"rollout", config, "--run-dir", dir + "/a", "--worker-id", "w"}, dir + "/w1.log");
  ASSERT_EQ(testing::wait_exit(t1, 120), 0) << testing::log_tail(dir + "/t1.log");
  ASSERT_EQ(testing::wait_exit(w1, 60), 0) << testing::log_tail(dir + "/w1.log");
  // The next run's worker first, its trainer 8 s later.
  Subprocess w2 = testing::spawn_moerl({"rollout", config, "--run-dir", dir + "/b", "--worker-id", "w"}, dir + "/w2.log");
  std::this_thread::sleep_for(std::chrono::seconds(8));
  int code = 0;
  ASSERT_FALSE(testing::exited(w2, &code)) << "the worker gave up before its trainer started (exit " << code << ")\n"
                                           << testing::log_tail(dir + "/w2.log");
  Subprocess t2 =
      testing::spawn_moerl({"trainer", config, "--run-dir", dir + "/b", "--fresh", "--no-plot"}, dir + "/t2.log");
  ASSERT_EQ(testing::wait_exit(t2, 120), 0) << testing::log_tail(dir + "/t2.log");
  ASSERT_EQ(testing::wait_exit(w2, 60), 0) << testing::log_tail(dir + "/w2.log");
  testing::expect_each_task_trained_once(dir + "/b", 2, 8);
}

}  // namespace
}  // namespace moerl::train
