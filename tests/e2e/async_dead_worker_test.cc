// An in-process async run (`moerl train`, worker threads) whose every worker thread dies (here
// a file stands where its scratch directory must go) stops with the worker's error within
// seconds, instead of the trainer waiting for experience that cannot come.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/deadline.h"
#include "base/files.h"
#include "e2e/async_test_util.h"

namespace moerl::train {
namespace {

TEST(AsyncDeadWorker, TheTrainerStopsWithTheErrorOnceEveryWorkerThreadHasDied) {
  if (testing::moerl_bin().empty()) GTEST_SKIP() << "MOERL_BIN is not set (run through ctest)";
  const std::string dir = testing::make_temp_dir("async-dead-worker");
  const std::string config = testing::write_config(dir, testing::tiny_config_text("mode = \"async\"\ntasks_per_lease = 2"));
  // The worker threads' scratch directories go under run/scratch/: a file there stops them.
  std::filesystem::create_directories(dir + "/run");
  std::ofstream(dir + "/run/scratch") << "not a directory\n";
  const std::string log = dir + "/train.log";
  Subprocess p = testing::spawn_moerl({"train", config, "--run-dir", dir + "/run", "--no-plot"}, log);
  const double t0 = now_seconds();
  const int code = testing::wait_exit(p, 120);
  const double took = now_seconds() - t0;
  EXPECT_NE(code, 0) << testing::log_tail(log);
  EXPECT_NE(code, -1) << "still running after 120 s: the trainer waited for a dead worker\n" << testing::log_tail(log);
  EXPECT_LT(took, 60) << testing::log_tail(log);
  const std::string text = testing::read_text(log);
  EXPECT_NE(text.find("every rollout worker thread (1) stopped with an error"), std::string::npos) << testing::log_tail(log);
  EXPECT_NE(text.find("run/scratch"), std::string::npos) << "the worker's own error is named\n" << testing::log_tail(log);
  remove_tree(dir);
}

}  // namespace
}  // namespace moerl::train
