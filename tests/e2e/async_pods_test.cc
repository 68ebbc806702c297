// Rollout workers started the way the rendered Deployment starts them: no --worker-id, each
// moerl in its own PID namespace (so every one is PID 1, like one process per pod), all
// sharing one run directory. Their default ids must differ, so no worker takes over another's
// leases or trips over its staging directory: the run completes, every task is trained once,
// nothing is lost, duplicated, re-delivered or dead-lettered.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "e2e/async_test_util.h"
#include "runtime/redis_server.h"

namespace moerl::train {
namespace {

struct WorkerLog {
  std::string id;           // from "ID: worker loop done"
  std::string logged_id;    // from "rollout worker id ID" (the id chosen, logged at start)
  int64_t completed = -1;   // from the loop's last line
  int64_t lost_leases = -1;
  std::string text;
};

WorkerLog read_worker_log(const std::string& path) {
  WorkerLog w;
  w.text = testing::read_text(path);
  std::smatch m;
  if (std::regex_search(w.text, m, std::regex("rollout worker id (\\S+)"))) w.logged_id = m[1];
  if (std::regex_search(w.text, m, std::regex("(\\S+): worker loop done"))) w.id = m[1];
  if (std::regex_search(w.text, m, std::regex("(\\d+) completed, \\d+ handed back, (\\d+) lost leases"))) {
    w.completed = std::stoll(m[1]);
    w.lost_leases = std::stoll(m[2]);
  }
  return w;
}

TEST(AsyncPods, WorkersWithoutIdsInOwnPidNamespacesShareARunDir) {
  if (testing::moerl_bin().empty()) GTEST_SKIP() << "MOERL_BIN is not set (run through ctest)";
  if (!testing::pid_namespaces_available()) GTEST_SKIP() << "unshare -Urpf --mount-proc does not work here";
  std::string dir = testing::make_temp_dir("async-pods");
  runtime::RedisServer server = runtime::RedisServer::start(dir + "/redis", Deadline::after_seconds(15));
  const int kSteps = 6, kPrompts = 4, kWorkers = 3;
  // No lease expires and no record goes stale here: any takeover or re-delivery comes from two
  // workers sharing an id.
  const std::string runtime = testing::async_runtime_text(server.url(), "pods");
  std::string config = testing::write_config(
      dir, testing::tiny_config_text(runtime, "",
                                     {"rollout.prompts_per_step=" + std::to_string(kPrompts),
                                      "rollout.num_workers=" + std::to_string(kWorkers),
                                      "train.steps=" + std::to_string(kSteps), "train.threads=1"}));
  std::string run = dir + "/run";
  std::string log = dir + "/log";
  std::filesystem::create_directories(log);

  Subprocess trainer = testing::spawn_moerl({"trainer", config, "--run-dir", run, "--no-plot"}, log + "/trainer.log");
  std::vector<Subprocess> workers;
  for (int i = 0; i < kWorkers; ++i) {
    workers.push_back(testing::spawn_moerl_in_pid_namespace({"rollout", config, "--run-dir", run},
                                                            log + "/rollout" + std::to_string(i) + ".log",
                                                            {"POD_NAME"}));
  }
  ASSERT_EQ(testing::wait_exit(trainer, 300), 0) << "trainer failed or hung; logs in " << log;
  for (int i = 0; i < kWorkers; ++i) {
    EXPECT_EQ(testing::wait_exit(workers[i], 60), 0) << "rollout" << i << " did not drain; logs in " << log;
  }

  // Distinct ids, none of them the PID every namespace shares; no lease lost to another.
  std::set<std::string> ids;
  int64_t completed = 0;
  for (int i = 0; i < kWorkers; ++i) {
    WorkerLog w = read_worker_log(log + "/rollout" + std::to_string(i) + ".log");
    ASSERT_FALSE(w.id.empty()) << "rollout" << i << " did not finish its loop:\n" << w.text;
    EXPECT_EQ(w.logged_id, w.id) << "the id chosen is logged at start";
    EXPECT_TRUE(ids.insert(w.id).second) << "two workers chose the id " << w.id;
    EXPECT_EQ(w.id.find("worker-1"), std::string::npos) << w.id;
    EXPECT_EQ(w.lost_leases, 0) << "rollout" << i << " (" << w.id << "):\n" << w.text;
    EXPECT_EQ(w.text.find("Directory not empty"), std::string::npos) << w.text;
    // A new id per start would leave a scratch dir per start in the shared run dir.
    EXPECT_FALSE(std::filesystem::exists(run + "/scratch/" + w.id)) << "scratch dir of " << w.id << " left behind";
    completed += w.completed;
  }
  EXPECT_EQ(completed, kSteps * kPrompts) << "tasks generated more than once, or not at all";

  std::ifstream sin(run + "/summary.json");
  nlohmann::json summary = nlohmann::json::parse(sin);
  const nlohmann::json& acc = summary.at("accounting");
  EXPECT_EQ(acc.at("lost").get<int64_t>(), 0) << acc.dump();
  EXPECT_EQ(acc.at("tasks_created").get<int64_t>(), kSteps * kPrompts) << acc.dump();
  EXPECT_EQ(acc.at("duplicates_dropped").get<int64_t>(), 0) << acc.dump();
  EXPECT_EQ(acc.at("tasks_requeued").get<int64_t>(), 0) << acc.dump();
  EXPECT_EQ(acc.at("dead_lettered").get<int64_t>(), 0) << acc.dump();
  EXPECT_EQ(summary.at("steps").at("rl").get<int64_t>(), kSteps);

  std::set<uint64_t> cursors;
  std::ifstream tin(run + "/trained.jsonl");
  for (std::string line; std::getline(tin, line);) {
    if (line.empty()) continue;
    nlohmann::json t = nlohmann::json::parse(line);
    EXPECT_TRUE(cursors.insert(t.at("cursor").get<uint64_t>()).second) << "trained twice: " << line;
    EXPECT_TRUE(ids.count(t.at("worker").get<std::string>())) << "record from an unknown worker: " << line;
  }
  EXPECT_EQ(cursors.size(), static_cast<size_t>(kSteps * kPrompts));
  remove_tree(dir);
}

}  // namespace
}  // namespace moerl::train
