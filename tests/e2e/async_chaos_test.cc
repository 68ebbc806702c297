// Chaos test of the asynchronous job over Redis (AOF on), started the way the manifests start
// it: the trainer process and 3 rollout worker PROCESSES without --worker-id, two of them each
// in its own PID namespace (every one PID 1, like pods). A random namespaced worker is
// SIGKILLed and restarted every 5 steps or 2.5 s; the third worker is frozen (SIGSTOP) past its
// lease, then resumed, and later SIGTERMed mid-task (it must drain and exit 0); the trainer is
// SIGKILLed before its first RL checkpoint and again after one, and restarted each time; the
// redis-server is SIGKILLed and restarted from its AOF mid-run. The run must complete with
// lost == 0, every task trained exactly once (trained.jsonl + accounting) and the training
// reward rising from a deliberately short SFT warm start. Run once with workers that generate
// each lease whole and once with streaming workers.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "runtime/redis_server.h"
#include "e2e/async_test_util.h"

namespace moerl::train {
using namespace moerl::job;  // NOLINT: the job API under test
namespace {

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

// Param: the workers stream ([rollout] streaming: rows fed from the queue as they free up,
// each group put as it ends, versions swapped between decode steps) or generate each lease whole.
class AsyncChaos : public ::testing::TestWithParam<bool> {};

TEST_P(AsyncChaos, WorkersAndTrainerKilledNothingLostNothingTrainedTwice) {
  if (testing::moerl_bin().empty()) GTEST_SKIP() << "MOERL_BIN is not set (run through ctest)";
  std::string dir = testing::make_temp_dir("async-chaos");
  runtime::RedisServer server = runtime::RedisServer::start(dir + "/redis", Deadline::after_seconds(15));
  const int kSteps = 30, kPrompts = 8;
  std::string runtime = "mode = \"async\"\nqueue_url = \"" + server.url() +
                        "\"\nnamespace = \"chaos\"\ntasks_per_lease = 2\nlease_seconds = 2\n"
                        "max_staleness = 4\nstale_policy = \"regenerate\"\ndrain_seconds = 5\n"
                        "drain_margin_seconds = 0.5\ncall_timeout_seconds = 10\ntrainer_lease_seconds = 3\n";
  // The demo model (hidden 64, 2 layers, 4 experts), a deliberately weak SFT warm start
  // (20 steps: answers often malformed) and partial credit for a well-formed answer, so RL
  // has a reward to climb within 30 steps (in sync mode, seeds 1-3: training reward +0.10
  // from the first third to the last).
  std::string text = testing::tiny_config_text(
      runtime, "",
      {"model.hidden_size=64", "model.num_hidden_layers=2", "model.num_attention_heads=4",
       "model.num_key_value_heads=2", "model.moe_intermediate_size=64", "algorithm.group_size=8",
       "rollout.prompts_per_step=" + std::to_string(kPrompts), "rollout.max_new_tokens=6", "train.sft_steps=20",
       "task.digits=1", "train.steps=" + std::to_string(kSteps), "train.eval_prompts=50", "task.format_reward=0.3",
       "train.sft_batch_size=64", "train.sft_lr=3e-3", "train.lr=2e-3", "train.checkpoint_every=3", "train.threads=1",
       GetParam() ? "rollout.streaming=true" : "rollout.streaming=false",
       GetParam() ? "rollout.batch_rows=16" : "rollout.batch_rows=0"});
  std::string config = testing::write_config(dir, text);
  std::string run = dir + "/run";
  std::string log = dir + "/log";
  std::filesystem::create_directories(log);

  auto start_trainer = [&](int n) {
    return testing::spawn_moerl({"trainer", config, "--run-dir", run, "--no-plot"}, log + "/trainer" + std::to_string(n) + ".log");
  };
  int restarts = 0;
  std::vector<std::string> worker_logs(3);  // each slot's current log
  const bool namespaces = testing::pid_namespaces_available();
  auto start_worker = [&](int slot) {
    // No --worker-id: each worker names itself (hostname + random suffix).
    const std::string file = log + "/w" + std::to_string(slot) + "-" + std::to_string(restarts++) + ".log";
    worker_logs[slot] = file;
    const std::vector<std::string> args = {"rollout", config, "--run-dir", run};
    // Slot 0 is signalled (SIGSTOP, SIGTERM) directly, so it runs outside a namespace.
    return slot > 0 && namespaces ? testing::spawn_moerl_in_pid_namespace(args, file, {"POD_NAME"})
                                  : testing::spawn_moerl(args, file);
  };
  Subprocess trainer = start_trainer(0);
  std::vector<Subprocess> workers;
  for (int i = 0; i < 3; ++i) workers.push_back(start_worker(i));

  std::mt19937 rng(7);
  bool trainer_killed_early = false, trainer_killed = false, sigtermed = false, frozen = false, redis_killed = false;
  int sigterm_code = -2, kills = 0, code = 0;
  double thaw_at = 0;  // when the frozen worker is resumed (0: not frozen now)
  Deadline deadline = Deadline::after_seconds(480);
  // SIGKILLs come every 5 RL steps or every 2.5 s, whichever is first, so a fast machine
  // that finishes the run in a few seconds still sees several (kills >= 2 below).
  double next_kill = now_seconds() + 3;
  int64_t next_kill_step = 5;
  while (true) {
    ASSERT_FALSE(deadline.expired()) << "run did not finish; logs in " << log;
    if (testing::exited(trainer, &code)) {
      ASSERT_EQ(code, 0) << "trainer failed; logs in " << log;
      break;
    }
    int64_t steps = testing::rl_steps_done(run + "/metrics.jsonl");
    if (!trainer_killed_early && steps >= 1) {
      // Before the first RL checkpoint (every 3 steps): the restart re-reads the stream.
      trainer.signal(SIGKILL);
      testing::wait_exit(trainer, 10);
      trainer = start_trainer(2);
      trainer_killed_early = true;
    }
    if (!frozen && trainer_killed_early && steps >= 3) {
      // Frozen past its 2 s lease: its tasks are taken over; resumed, its acks fail and its
      // records are duplicates the trainer drops.
      workers[0].signal(SIGSTOP);
      thaw_at = now_seconds() + 3.5;
      frozen = true;
    }
    if (thaw_at > 0 && now_seconds() >= thaw_at) {
      workers[0].signal(SIGCONT);
      thaw_at = 0;
    }
    if (!redis_killed && steps >= 2 * kSteps / 3) {
      server.kill9();
      std::this_thread::sleep_for(std::chrono::seconds(1));
      server.restart(Deadline::after_seconds(30));
      redis_killed = true;
    }
    if (!trainer_killed && steps >= kSteps / 3) {
      trainer.signal(SIGKILL);
      testing::wait_exit(trainer, 10);
      trainer = start_trainer(1);
      trainer_killed = true;
    }
    if (!sigtermed && thaw_at == 0 && frozen && steps >= kSteps / 2) {
      // SIGTERM worker 0 mid-task: it drains and exits 0; then a fresh worker takes its slot.
      workers[0].signal(SIGTERM);
      sigterm_code = testing::wait_exit(workers[0], 20);
      workers[0] = start_worker(0);
      sigtermed = true;
    }
    if (steps >= 1 && (now_seconds() >= next_kill || steps >= next_kill_step) && steps < kSteps) {
      int slot = 1 + static_cast<int>(rng() % 2);
      workers[slot].signal(SIGKILL);
      testing::wait_exit(workers[slot], 10);
      workers[slot] = start_worker(slot);
      ++kills;
      next_kill = now_seconds() + 2.5;
      next_kill_step = steps + 5;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (thaw_at > 0) workers[0].signal(SIGCONT);
  for (size_t i = 0; i < workers.size(); ++i) {
    EXPECT_EQ(testing::wait_exit(workers[i], 30), 0)
        << "a worker did not drain at the end\n" << testing::log_tail(worker_logs[i]);
  }
  EXPECT_TRUE(trainer_killed_early);
  EXPECT_TRUE(trainer_killed);
  EXPECT_TRUE(frozen);
  EXPECT_TRUE(redis_killed);
  EXPECT_TRUE(sigtermed);
  EXPECT_EQ(sigterm_code, 0) << "SIGTERMed worker must drain and exit 0";
  bool streamed = false;
  for (const std::string& f : worker_logs) streamed |= testing::read_text(f).find("streaming worker done") != std::string::npos;
  EXPECT_EQ(streamed, GetParam()) << "the workers ran the loop the config asks for";
  EXPECT_GE(kills, 2);

  std::ifstream sin(run + "/summary.json");
  nlohmann::json summary = nlohmann::json::parse(sin);
  const nlohmann::json& acc = summary.at("accounting");
  EXPECT_EQ(acc.at("lost").get<int64_t>(), 0) << acc.dump();
  EXPECT_EQ(acc.at("tasks_created").get<int64_t>(), kSteps * kPrompts) << acc.dump();
  EXPECT_EQ(summary.at("steps").at("rl").get<int64_t>(), kSteps);

  // Every task trained exactly once: one line per dataset cursor, none twice.
  std::vector<nlohmann::json> trained = read_jsonl(run + "/trained.jsonl");
  std::set<uint64_t> cursors;
  std::set<std::string> keys;
  for (const auto& t : trained) {
    EXPECT_TRUE(cursors.insert(t.at("cursor").get<uint64_t>()).second) << "trained twice: " << t.dump();
    keys.insert(t.at("task_id").get<std::string>() + "#" + std::to_string(t.at("attempt").get<int>()));
  }
  EXPECT_EQ(cursors.size(), static_cast<size_t>(kSteps * kPrompts));
  EXPECT_EQ(keys.size(), cursors.size());
  EXPECT_EQ(acc.at("samples_trained").get<int64_t>(), kSteps * kPrompts * 8) << acc.dump();

  // Reward rises under the chaos: the mean training reward of the last third is above the
  // first third's by a margin (about half the rise seen without chaos); a stalled learner or
  // a collapse (e.g. the trainer restart mixing up versions) fails here.
  std::vector<double> rewards;
  std::map<int64_t, double> by_step;  // a replayed step after the trainer restart: keep the last
  for (const auto& m : read_jsonl(run + "/metrics.jsonl")) {
    if (m.value("phase", "") == "rl") by_step[m.at("step").get<int64_t>()] = m.at("reward").get<double>();
  }
  for (const auto& [s, r] : by_step) rewards.push_back(r);
  ASSERT_EQ(rewards.size(), static_cast<size_t>(kSteps));
  double first = 0, last = 0;
  const int third = kSteps / 3;
  for (int i = 0; i < third; ++i) {
    first += rewards[i] / third;
    last += rewards[kSteps - 1 - i] / third;
  }
  std::printf("chaos: training reward first third %.3f, last third %.3f; eval %s\n", first, last,
              summary.at("eval").dump().c_str());
  EXPECT_GT(first, 0.05) << "the SFT warm start should give some well-formed answers";
  EXPECT_GT(last, first + 0.05) << "first third " << first << ", last third " << last;
  // Held-out (greedy) reward does not fall below the warm start's.
  EXPECT_GE(summary.at("eval").at("final").get<double>(), summary.at("eval").at("sft").get<double>() - 0.02)
      << summary.at("eval").dump();
  remove_tree(dir);
}

INSTANTIATE_TEST_SUITE_P(Workers, AsyncChaos, ::testing::Values(false, true),
                         [](const auto& p) { return p.param ? "Streaming" : "Batch"; });

}  // namespace
}  // namespace moerl::train
