// Redis down when a rollout worker PROCESS starts (a pod rescheduled while the queue's pod is
// restarting): the worker keeps asking for the first policy version until Redis is back and
// the trainer publishes one, then takes part in the run and drains with exit 0. It used to
// exit 1 at once ("XREVRANGE got no answer in 0.5 s ... Connection refused"), which the chaos
// test hit whenever it restarted a worker during its Redis kill.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>

#include "base/deadline.h"
#include "base/files.h"
#include "e2e/async_test_util.h"
#include "runtime/redis_server.h"

namespace moerl::train {
namespace {

TEST(AsyncOutage, WorkerStartedWhileRedisIsDownWaitsForIt) {
  if (testing::moerl_bin().empty()) GTEST_SKIP() << "MOERL_BIN is not set (run through ctest)";
  std::string dir = testing::make_temp_dir("async-outage");
  runtime::RedisServer server = runtime::RedisServer::start(dir + "/redis", Deadline::after_seconds(15));
  const int kSteps = 3, kPrompts = 2;
  std::string config = testing::write_config(
      dir, testing::tiny_config_text(testing::async_runtime_text(server.url(), "outage"), "",
                                     {"rollout.prompts_per_step=" + std::to_string(kPrompts),
                                      "train.steps=" + std::to_string(kSteps), "train.eval_prompts=4",
                                      "train.threads=1"}));
  const std::string run = dir + "/run";
  server.kill9();
  Subprocess worker = testing::spawn_moerl({"rollout", config, "--run-dir", run, "--worker-id", "w0"}, dir + "/w0.log");
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // well past one call's retries
  int code = 0;
  ASSERT_FALSE(testing::exited(worker, &code)) << "the worker gave up while Redis was down (exit " << code << ")\n"
                                               << testing::log_tail(dir + "/w0.log");
  server.restart(Deadline::after_seconds(30));
  Subprocess trainer = testing::spawn_moerl({"trainer", config, "--run-dir", run, "--no-plot"}, dir + "/trainer.log");
  ASSERT_EQ(testing::wait_exit(trainer, 240), 0) << testing::log_tail(dir + "/trainer.log");
  EXPECT_EQ(testing::wait_exit(worker, 30), 0) << "the worker did not drain at the end\n"
                                               << testing::log_tail(dir + "/w0.log");
  testing::expect_each_task_trained_once(run, kSteps, kSteps * kPrompts);
  const std::string log = testing::read_text(dir + "/w0.log");
  EXPECT_NE(log.find("unreachable"), std::string::npos) << "the outage was not reported\n" << log;
  remove_tree(dir);
}

}  // namespace
}  // namespace moerl::train
