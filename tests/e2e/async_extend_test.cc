// A finished async run extended: `moerl train` with Redis (rollout workers as processes, as the
// launcher starts them) runs to its last step, then the same command with more steps resumes
// from the checkpoint and trains the rest. The first run's end left the "run done" marker in
// the store; before, the new workers read it, exited at once, and the resumed trainer waited
// for experience forever.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "e2e/async_test_util.h"
#include "runtime/redis_server.h"

namespace moerl::train {
namespace {

TEST(AsyncExtend, AFinishedRunGivenMoreStepsResumesAndTrainsThem) {
  if (testing::moerl_bin().empty()) GTEST_SKIP() << "MOERL_BIN is not set (run through ctest)";
  std::string dir = testing::make_temp_dir("async-extend");
  runtime::RedisServer server = runtime::RedisServer::start(dir + "/redis", Deadline::after_seconds(15));
  const std::string config = testing::write_config(
      dir, testing::tiny_config_text(testing::async_runtime_text(server.url(), "extend"), "",
                                     {"rollout.prompts_per_step=4", "rollout.num_workers=1", "train.steps=2",
                                      "train.checkpoint_every=2", "train.eval_prompts=4", "train.threads=1"}));
  const std::string run = dir + "/run";
  Subprocess first = testing::spawn_moerl({"train", config, "--run-dir", run, "--no-plot"}, dir + "/first.log");
  ASSERT_EQ(testing::wait_exit(first, 150), 0) << testing::log_tail(dir + "/first.log");
  ASSERT_EQ(testing::rl_steps_done(run + "/metrics.jsonl"), 2);

  Subprocess more = testing::spawn_moerl({"train", config, "--run-dir", run, "--no-plot", "--set", "train.steps=4"},
                                         dir + "/more.log");
  ASSERT_EQ(testing::wait_exit(more, 150), 0) << testing::log_tail(dir + "/more.log");
  EXPECT_NE(testing::read_text(dir + "/more.log").find("resumed at step 2"), std::string::npos);
  const nlohmann::json summary = nlohmann::json::parse(testing::read_text(run + "/summary.json"));
  EXPECT_EQ(summary["steps"]["rl"], 4) << summary.dump(2);
  EXPECT_EQ(summary["accounting"]["lost"], 0) << summary["accounting"].dump(2);
  EXPECT_EQ(testing::rl_steps_done(run + "/metrics.jsonl"), 4);
}

}  // namespace
}  // namespace moerl::train
