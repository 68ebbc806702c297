// `moerl train` with Redis starts its rollout workers as processes; one SIGKILLed mid-run (the
// OOM killer, a crash) is started again by the launcher, as a Deployment restarts a pod, and
// the run finishes with every task trained once. Before, the dead worker stayed dead and the
// trainer waited for experience forever.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "e2e/async_test_util.h"
#include "runtime/redis_server.h"

namespace moerl::train {
namespace {

// The pid of the process whose command line holds every one of `parts`; 0 if none.
pid_t find_process(const std::vector<std::string>& parts) {
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = testing::read_text(e.path().string() + "/cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    bool all = !cmd.empty();
    for (const std::string& p : parts) all = all && cmd.find(p) != std::string::npos;
    if (all) return static_cast<pid_t>(std::stol(name));
  }
  return 0;
}

TEST(AsyncWorkerRestart, AKilledWorkerProcessIsStartedAgainAndTheRunFinishes) {
  if (testing::moerl_bin().empty()) GTEST_SKIP() << "MOERL_BIN is not set (run through ctest)";
  std::string dir = testing::make_temp_dir("async-restart-worker");
  runtime::RedisServer server = runtime::RedisServer::start(dir + "/redis", Deadline::after_seconds(15));
  const std::string config = testing::write_config(
      dir, testing::tiny_config_text(testing::async_runtime_text(server.url(), "restartw"), "",
                                     {"rollout.prompts_per_step=4", "rollout.num_workers=1", "train.steps=12",
                                      "train.eval_prompts=4", "train.threads=1"}));
  const std::string run = dir + "/run";
  // 12 steps: the trainer keeps about one step of tasks ahead, so most of the run still needs
  // a worker when the first one is killed after step 1 (with 4 steps a quiet machine finished
  // before the launcher noticed the death).
  Subprocess job = testing::spawn_moerl({"train", config, "--run-dir", run, "--no-plot"}, dir + "/job.log");
  for (Deadline d = Deadline::after_seconds(90); testing::rl_steps_done(run + "/metrics.jsonl") < 1;) {
    ASSERT_FALSE(d.expired()) << testing::log_tail(dir + "/job.log");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const pid_t worker = find_process({"rollout", run, "--worker-id local-0"});
  ASSERT_GT(worker, 0) << "no worker process found";
  ASSERT_EQ(::kill(worker, SIGKILL), 0);
  ASSERT_EQ(testing::wait_exit(job, 150), 0) << testing::log_tail(dir + "/job.log");
  EXPECT_NE(testing::read_text(dir + "/job.log").find("rollout worker local-0 exited with status 137; restarting it"),
            std::string::npos)
      << testing::log_tail(dir + "/job.log");
  testing::expect_each_task_trained_once(run, 12, 48);
}

}  // namespace
}  // namespace moerl::train
