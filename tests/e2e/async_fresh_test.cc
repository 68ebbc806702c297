// `moerl trainer --fresh` on a namespace an earlier run used (same runtime.namespace, same run
// dir). The earlier run finished and left its task stream, producer cursor, experience stream
// and trainer group in Redis. The fresh trainer removes that run state once it holds the
// trainer lease (logging how many keys), so it creates its tasks from cursor 0 and trains each
// once, at its first attempt, reading none of the old experience (before, it resumed at the
// old producer cursor, read the old records, dropped them as a dead lineage and re-created
// every task). A third trainer started with --fresh while the fresh one is live is refused,
// naming the holder, and removes nothing: the live run finishes untouched.
#include <gtest/gtest.h>

#include <chrono>
#include <sstream>
#include <string>
#include <thread>

#include "base/deadline.h"
#include "base/files.h"
#include "e2e/async_test_util.h"
#include "runtime/redis_server.h"

namespace moerl::train {
namespace {

// Waits until `log` holds `text`; fails when `p` exits first or after `seconds`.
::testing::AssertionResult wait_for_log(Subprocess& p, const std::string& log, const std::string& text,
                                        double seconds) {
  for (Deadline d = Deadline::after_seconds(seconds); testing::read_text(log).find(text) == std::string::npos;
       std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    int code = 0;
    if (testing::exited(p, &code) || d.expired()) {
      return ::testing::AssertionFailure() << "no '" << text << "' (exit " << code << ")\n" << testing::log_tail(log);
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(AsyncFresh, AFreshRunOnAReusedNamespaceStartsFromNothingAndNeverWipesALiveTrainer) {
  if (testing::moerl_bin().empty()) GTEST_SKIP() << "MOERL_BIN is not set (run through ctest)";
  std::string dir = testing::make_temp_dir("async-fresh");
  runtime::RedisServer server = runtime::RedisServer::start(dir + "/redis", Deadline::after_seconds(15));
  const int kSteps = 3, kPrompts = 4;
  const std::string runtime = testing::async_runtime_text(server.url(), "reuse") + "trainer_lease_seconds = 2\n";
  std::string config = testing::write_config(
      dir, testing::tiny_config_text(runtime, "",
                                     {"rollout.prompts_per_step=" + std::to_string(kPrompts),
                                      "train.steps=" + std::to_string(kSteps), "train.eval_prompts=4",
                                      "train.threads=1"}));
  const std::string run = dir + "/run";
  // The earlier run, to its end.
  Subprocess first = testing::spawn_moerl({"trainer", config, "--run-dir", run, "--no-plot"}, dir + "/t1.log");
  Subprocess w0 = testing::spawn_moerl({"rollout", config, "--run-dir", run, "--worker-id", "w0"}, dir + "/w0.log");
  ASSERT_EQ(testing::wait_exit(first, 120), 0) << testing::log_tail(dir + "/t1.log");
  ASSERT_EQ(testing::wait_exit(w0, 60), 0) << testing::log_tail(dir + "/w0.log");  // drained at the run's end
  // The fresh run. Its worker starts only after a third trainer was refused: until then the
  // fresh trainer holds the namespace, waiting for experience.
  Subprocess fresh = testing::spawn_moerl({"trainer", config, "--run-dir", run, "--fresh", "--no-plot"},
                                          dir + "/t2.log");
  ASSERT_TRUE(wait_for_log(fresh, dir + "/t2.log", "holds runtime.namespace 'reuse'", 60));
  Subprocess third = testing::spawn_moerl({"trainer", config, "--run-dir", dir + "/other", "--fresh", "--no-plot"},
                                          dir + "/t3.log");
  EXPECT_NE(testing::wait_exit(third, 60), 0);
  const std::string third_log = testing::read_text(dir + "/t3.log");
  EXPECT_NE(third_log.find("is held by another live trainer ('2 trainer-"), std::string::npos) << third_log;
  EXPECT_EQ(third_log.find("--fresh: removed"), std::string::npos) << third_log;
  Subprocess w1 = testing::spawn_moerl({"rollout", config, "--run-dir", run, "--worker-id", "w1"}, dir + "/w1.log");
  ASSERT_EQ(testing::wait_exit(fresh, 120), 0) << testing::log_tail(dir + "/t2.log");
  const std::string log = testing::read_text(dir + "/t2.log");
  EXPECT_NE(log.find("--fresh: removed "), std::string::npos) << log;
  const nlohmann::json acc = nlohmann::json::parse(testing::read_text(run + "/summary.json"))["accounting"];
  EXPECT_EQ(acc["tasks_created"], kSteps * kPrompts) << acc.dump(2);
  EXPECT_EQ(acc["records_dead_lineage"], 0) << "the earlier run's records were read\n" << acc.dump(2);
  EXPECT_EQ(acc["tasks_requeued"], 0) << acc.dump(2);
  EXPECT_EQ(acc["duplicates_dropped"], 0) << acc.dump(2);
  testing::expect_each_task_trained_once(run, kSteps, kSteps * kPrompts);
  std::istringstream trained(testing::read_text(run + "/trained.jsonl"));
  for (std::string line; std::getline(trained, line);) {
    if (!line.empty()) EXPECT_EQ(nlohmann::json::parse(line)["attempt"], 0) << line;
  }
  EXPECT_EQ(testing::wait_exit(w1, 60), 0) << testing::log_tail(dir + "/w1.log");
  remove_tree(dir);
}

}  // namespace
}  // namespace moerl::train
