// Weight versions through shared memory ([runtime] weight_transport = "shared"), as
// `moerl train` runs an async job with Redis: the rollout worker is a separate process and
// activates the trainer's versions from the memory-mapped files, and no version is written
// to the object store.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "e2e/async_test_util.h"
#include "runtime/redis_server.h"

namespace moerl::train {
namespace {

namespace fs = std::filesystem;

TEST(AsyncSharedWeights, WorkerProcessesActivateVersionsFromSharedMemoryAndTheStoreHoldsNone) {
  if (testing::moerl_bin().empty()) GTEST_SKIP() << "MOERL_BIN is not set (run through ctest)";
  std::string dir = testing::make_temp_dir("async-shared");
  runtime::RedisServer server = runtime::RedisServer::start(dir + "/redis", Deadline::after_seconds(15));
  fs::create_directories(dir + "/shm");
  const std::string rt = testing::async_runtime_text(server.url(), "shared") +
                         "weight_transport = \"shared\"\nshared_weights_dir = \"" + dir + "/shm\"\n";
  const std::string config = testing::write_config(
      dir, testing::tiny_config_text(rt, "",
                                     {"rollout.prompts_per_step=4", "rollout.num_workers=1", "train.steps=5",
                                      "train.eval_prompts=4", "train.threads=1"}));
  const std::string run = dir + "/run";
  Subprocess job = testing::spawn_moerl({"train", config, "--run-dir", run, "--no-plot"}, dir + "/job.log");
  ASSERT_EQ(testing::wait_exit(job, 150), 0) << testing::log_tail(dir + "/job.log");
  testing::expect_each_task_trained_once(run, 5, 20);
  // The worker activated versions the trainer published after its first: "versions A..B", B > A.
  std::smatch m;
  const std::string log = testing::read_text(dir + "/job.log");
  ASSERT_TRUE(std::regex_search(log, m, std::regex(R"(local-0: exit \(\d+ tasks, \d+ batches, versions (\d+)\.\.(\d+)\))")))
      << testing::log_tail(dir + "/job.log");
  EXPECT_GT(std::stoi(m[2]), std::stoi(m[1])) << m[0];
  // The trainer removed its two files (copies of the weights in memory) when it ended.
  EXPECT_TRUE(fs::is_empty(dir + "/shm")) << "shared-memory version files left behind";
  size_t store_versions = 0;
  if (fs::exists(run + "/store/weights")) {
    for (const auto& e : fs::recursive_directory_iterator(run + "/store/weights")) store_versions += e.is_regular_file();
  }
  EXPECT_EQ(store_versions, 0u) << "versions went through the store";
}

}  // namespace
}  // namespace moerl::train
