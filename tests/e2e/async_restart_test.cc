// A trainer SIGKILLed before its first RL checkpoint (RL step 3, default checkpointing) and
// restarted as Kubernetes restarts it (same command, same run dir, same namespace). The first
// life had read and acknowledged records it never checkpointed, and published weight
// versions that died with it. The second life waits for the first one's lease to run out,
// reads the experience stream from its start through its own consumer group, drops the
// records generated with the dead life's versions (records_dead_lineage) and enqueues their
// tasks again: it finishes with lost = 0 and every task trained exactly once. (It used to
// wait forever, "no experience within 600 s; still waiting".)
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

TEST(AsyncRestart, TrainerKilledBeforeItsFirstCheckpointRecoversWhatItHadConsumed) {
  if (testing::moerl_bin().empty()) GTEST_SKIP() << "MOERL_BIN is not set (run through ctest)";
  std::string dir = testing::make_temp_dir("async-restart");
  runtime::RedisServer server = runtime::RedisServer::start(dir + "/redis", Deadline::after_seconds(15));
  const int kSteps = 12, kPrompts = 4;
  const std::string runtime =
      testing::async_runtime_text(server.url(), "restart") + "trainer_lease_seconds = 3\n";
  std::string config = testing::write_config(
      dir, testing::tiny_config_text(runtime, "",
                                     {"rollout.prompts_per_step=" + std::to_string(kPrompts),
                                      "train.steps=" + std::to_string(kSteps), "train.eval_prompts=4",
                                      "train.threads=1"}));
  const std::string run = dir + "/run";
  Subprocess trainer = testing::spawn_moerl({"trainer", config, "--run-dir", run, "--no-plot"}, dir + "/trainer0.log");
  Subprocess worker = testing::spawn_moerl({"rollout", config, "--run-dir", run, "--worker-id", "w0"}, dir + "/w0.log");
  for (Deadline d = Deadline::after_seconds(240); testing::rl_steps_done(run + "/metrics.jsonl") < 3;
       std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
    ASSERT_FALSE(d.expired()) << testing::read_text(dir + "/trainer0.log");
    int code = 0;
    ASSERT_FALSE(testing::exited(trainer, &code)) << "the trainer ended before step 3 (" << code << ")";
  }
  trainer.signal(SIGKILL);
  testing::wait_exit(trainer, 10);
  Subprocess again = testing::spawn_moerl({"trainer", config, "--run-dir", run, "--no-plot"}, dir + "/trainer1.log");
  const int code = testing::wait_exit(again, 240);
  const std::string log = testing::read_text(dir + "/trainer1.log");
  ASSERT_EQ(code, 0) << log;
  EXPECT_EQ(log.find("still waiting"), std::string::npos) << log;
  EXPECT_NE(log.find("waiting for it"), std::string::npos) << "the dead life's lease was not waited out\n" << log;
  const nlohmann::json acc = nlohmann::json::parse(testing::read_text(run + "/summary.json"))["accounting"];
  EXPECT_GT(acc["records_dead_lineage"].get<int64_t>(), 0) << "the first life's records were not read again\n"
                                                           << acc.dump(2);
  // Each task of the run trained once, by the second life.
  testing::expect_each_task_trained_once(run, kSteps, kSteps * kPrompts);
  worker.signal(SIGTERM);
  testing::wait_exit(worker, 30);
  remove_tree(dir);
}

}  // namespace
}  // namespace moerl::train
