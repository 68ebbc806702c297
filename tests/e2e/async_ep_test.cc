// Expert parallelism inside the disaggregated job, started as the manifests start it: the
// trainer is ONE group of 2 ranks (`moerl launch -n 2 -- moerl trainer`, ep.size = 2) and
// each rollout worker is ONE instance of 2 ranks (`moerl launch -n 2 -- moerl rollout`,
// rollout.ep_size = 2), over Redis, fabric (tcp on loopback) for dispatch/combine.
// - The run completes: every task trained once, nothing lost; records name two workers (the
//   instances), not four; weight versions and checkpoints are sharded, one shard per rank.
// - A rank of an instance SIGKILLed: the instance dies whole, its lease comes back, the
//   restarted instance (as the Deployment restarts it) goes on; the trainer group SIGKILLed
//   after a checkpoint resumes from it: every step logged, weight versions only growing,
//   every task trained once, nothing lost. (That a resumed EP trainer continues bit for bit
//   is ep_train_test's EpTrain resume check, on the same checkpoint code.)
#include <gtest/gtest.h>
#include <signal.h>

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

namespace fs = std::filesystem;

// `moerl launch -n 2 -- moerl ARGS...` on loopback, output appended to `log`.
Subprocess launch2(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> argv = {testing::moerl_bin(), "launch", "-n", "2", "--", "moerl"};
  argv.insert(argv.end(), args.begin(), args.end());
  return Subprocess::spawn(argv, {.stdout_to = Redirect::file(log, FileMode::kAppend),
                                  .stderr_to = Redirect::to_stdout(),
                                  .set_env = {{"FI_PROVIDER", "tcp"}, {"FI_TCP_IFACE", "lo"}},
                                  .parent_death_signal = SIGKILL});
}

// The pid of the rank `rank` child of launcher `launcher` (0 if none).
pid_t rank_pid(pid_t launcher, int rank) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const size_t close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 2));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid != launcher) continue;
    std::ifstream env(e.path() / "environ");
    std::string vars((std::istreambuf_iterator<char>(env)), std::istreambuf_iterator<char>());
    if (vars.find(std::string("\0RANK=", 6) + std::to_string(rank) + std::string(1, '\0')) != std::string::npos) {
      return static_cast<pid_t>(std::stoi(name));
    }
  }
  return 0;
}

struct Job {
  std::string dir, run, log, config;
};

Job make_job(const std::string& tag, const std::string& queue_url, int steps, int prompts) {
  Job j;
  j.dir = testing::make_temp_dir(tag);
  j.run = j.dir + "/run";
  j.log = j.dir + "/log";
  fs::create_directories(j.log);
  const std::string runtime = testing::async_runtime_text(queue_url, tag) + "tasks_per_lease = 2\n";
  j.config = testing::write_config(
      j.dir, testing::tiny_config_text(runtime, "",
                                       {"ep.size=2", "ep.backend=\"fabric\"", "ep.timeout_seconds=60",
                                        "rollout.ep_size=2", "rollout.num_workers=2",
                                        "rollout.prompts_per_step=" + std::to_string(prompts),
                                        "train.steps=" + std::to_string(steps), "train.checkpoint_every=2",
                                        "train.eval_prompts=8", "train.threads=1"}));
  return j;
}

// Worker ids in RUN/trained.jsonl.
std::set<std::string> trained_workers(const std::string& run) {
  std::set<std::string> ids;
  std::istringstream lines(testing::read_text(run + "/trained.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) ids.insert(nlohmann::json::parse(line).at("worker").get<std::string>());
  }
  return ids;
}

TEST(AsyncEp, ATrainerGroupAndTwoRolloutInstancesOverRedis) {
  if (testing::moerl_bin().empty()) GTEST_SKIP() << "MOERL_BIN is not set (run through ctest)";
  const int kSteps = 6, kPrompts = 4;
  runtime::RedisServer server = runtime::RedisServer::start(testing::make_temp_dir("async-ep-redis"), Deadline::after_seconds(15));
  Job j = make_job("async-ep", server.url(), kSteps, kPrompts);
  Subprocess trainer = launch2({"trainer", j.config, "--run-dir", j.run, "--no-plot"}, j.log + "/trainer.log");
  Subprocess a = launch2({"rollout", j.config, "--run-dir", j.run}, j.log + "/a.log");
  Subprocess b = launch2({"rollout", j.config, "--run-dir", j.run}, j.log + "/b.log");
  ASSERT_EQ(testing::wait_exit(trainer, 400), 0) << testing::log_tail(j.log + "/trainer.log") << testing::log_tail(j.log + "/a.log");
  EXPECT_EQ(testing::wait_exit(a, 60), 0) << testing::log_tail(j.log + "/a.log");
  EXPECT_EQ(testing::wait_exit(b, 60), 0) << testing::log_tail(j.log + "/b.log");

  testing::expect_each_task_trained_once(j.run, kSteps, kSteps * kPrompts);
  const std::set<std::string> workers = trained_workers(j.run);
  EXPECT_EQ(workers.size(), 2u) << "one worker id per instance (rank 0's), not one per rank";
  nlohmann::json summary = nlohmann::json::parse(testing::read_text(j.run + "/summary.json"));
  EXPECT_EQ(summary["ep"]["size"], 2) << summary.dump(2);
  EXPECT_EQ(summary["records_surplus"], 0) << summary.dump(2);
  // Versions and checkpoints are sharded: one shard per trainer rank, one index.
  bool sharded_version = false;
  for (const auto& v : fs::directory_iterator(j.run + "/store/weights")) {
    if (!fs::exists(v.path() / "manifest.moerl.json")) continue;
    EXPECT_TRUE(fs::exists(v.path() / "model.safetensors.index.json")) << v.path();
    EXPECT_TRUE(fs::exists(v.path() / "model-00002-of-00002.safetensors")) << v.path();
    EXPECT_FALSE(fs::exists(v.path() / "model.safetensors")) << v.path();
    sharded_version = true;
  }
  EXPECT_TRUE(sharded_version);
  // Both instances generated, each as one worker whose followers generated their share.
  for (const char* inst : {"a", "b"}) {
    const std::string text = testing::read_text(j.log + "/" + inst + ".log");
    EXPECT_NE(text.find("[rank 1] "), std::string::npos) << inst;
    EXPECT_NE(text.find("rank 1: exit ("), std::string::npos) << testing::log_tail(j.log + "/" + inst + ".log");
  }
  remove_tree(j.dir);
}

TEST(AsyncEp, AKilledInstanceRankAndAKilledTrainerGroupLoseNothing) {
  if (testing::moerl_bin().empty()) GTEST_SKIP() << "MOERL_BIN is not set (run through ctest)";
  const int kSteps = 10, kPrompts = 4;
  runtime::RedisServer server = runtime::RedisServer::start(testing::make_temp_dir("async-ep-chaos-redis"), Deadline::after_seconds(15));
  Job j = make_job("async-ep-chaos", server.url(), kSteps, kPrompts);
  const std::vector<std::string> trainer_args = {"trainer", j.config, "--run-dir", j.run, "--no-plot"};
  const std::vector<std::string> rollout_args = {"rollout", j.config, "--run-dir", j.run};
  Subprocess trainer = launch2(trainer_args, j.log + "/trainer.log");
  Subprocess a = launch2(rollout_args, j.log + "/a.log");
  Subprocess b = launch2(rollout_args, j.log + "/b.log");
  auto wait_for_step = [&](int64_t step) {
    for (Deadline d = Deadline::after_seconds(300); !d.expired();) {
      if (testing::rl_steps_done(j.run + "/metrics.jsonl") >= step) return true;
      int code = 0;
      if (testing::exited(trainer, &code)) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  };

  // Stops an instance (its launcher first, so it starts no rank unfrozen, then its ranks);
  // the pids go to `out` for SIGCONT.
  auto freeze = [](Subprocess& inst, std::vector<pid_t>& out) {
    if (::kill(inst.pid(), SIGSTOP) == 0) out.push_back(inst.pid());
    for (int r = 0; r < 2; ++r) {
      if (pid_t p = rank_pid(inst.pid(), r); p > 0 && ::kill(p, SIGSTOP) == 0) out.push_back(p);
    }
  };

  // A follower rank of instance a dies mid-run: the instance's launcher stops it whole.
  // Instance b is frozen meanwhile, so the group cannot train to the end while a dies (seen
  // under load: it did, and the later kill then came after the last step).
  ASSERT_TRUE(wait_for_step(2)) << testing::log_tail(j.log + "/trainer.log");
  std::vector<pid_t> b_frozen;
  freeze(b, b_frozen);
  const pid_t follower = rank_pid(a.pid(), 1);
  ASSERT_GT(follower, 0) << "no rank 1 under instance a's launcher";
  ::kill(follower, SIGKILL);
  EXPECT_NE(testing::wait_exit(a, 120), 0) << "the instance must fail when one of its ranks dies";
  a = launch2(rollout_args, j.log + "/a2.log");  // as the Deployment restarts the pod
  for (pid_t p : b_frozen) ::kill(p, SIGCONT);

  // The trainer group dies after the step-4 checkpoint (the pod killed: launcher and ranks),
  // mid-run: the instances are frozen first, so the group cannot finish before the kill.
  ASSERT_TRUE(wait_for_step(5)) << testing::log_tail(j.log + "/trainer.log");
  std::vector<pid_t> frozen;
  for (Subprocess* inst : {&a, &b}) freeze(*inst, frozen);
  ASSERT_FALSE(fs::exists(j.run + "/summary.json")) << "the run finished before its trainer group was killed";
  trainer.signal(SIGKILL);
  testing::wait_exit(trainer, 30);
  for (pid_t p : frozen) ::kill(p, SIGCONT);
  trainer = launch2(trainer_args, j.log + "/trainer2.log");
  ASSERT_EQ(testing::wait_exit(trainer, 500), 0) << testing::log_tail(j.log + "/trainer2.log")
                                                  << testing::log_tail(j.log + "/a2.log");
  EXPECT_EQ(testing::wait_exit(a, 60), 0) << testing::log_tail(j.log + "/a2.log");
  EXPECT_EQ(testing::wait_exit(b, 60), 0) << testing::log_tail(j.log + "/b.log");

  std::smatch m;
  const std::string resumed_log = testing::read_text(j.log + "/trainer2.log");
  ASSERT_TRUE(std::regex_search(resumed_log, m, std::regex("resumed at step (\\d+)"))) << testing::log_tail(j.log + "/trainer2.log");
  EXPECT_GE(std::stoi(m[1]), 4) << "the group resumes from its newest checkpoint";
  EXPECT_LT(std::stoi(m[1]), kSteps) << "the group was killed mid-run";
  // Its rank 0 waited out the dead group's trainer lease before it read anything.
  EXPECT_NE(resumed_log.find("is held by"), std::string::npos) << testing::log_tail(j.log + "/trainer2.log");
  testing::expect_each_task_trained_once(j.run, kSteps, kSteps * kPrompts);
  // Every step is logged (the dead life's steps after its checkpoint again by the resumed
  // one), and the resumed life's weight versions go on above the dead life's.
  std::map<int64_t, uint64_t> version_of_step;  // the last row of each step wins
  std::istringstream lines(testing::read_text(j.run + "/metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    nlohmann::json row = nlohmann::json::parse(line, nullptr, false);
    if (row.is_discarded() || row.value("phase", "") != "rl") continue;
    version_of_step[row["step"].get<int64_t>()] = row["version"].get<uint64_t>();
  }
  ASSERT_EQ(version_of_step.size(), static_cast<size_t>(kSteps));
  for (int64_t s = 2; s <= kSteps; ++s) EXPECT_GT(version_of_step[s], version_of_step[s - 1]) << "step " << s;
  remove_tree(j.dir);
}

}  // namespace
}  // namespace moerl::train
