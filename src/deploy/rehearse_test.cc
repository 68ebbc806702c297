// The local rehearsal (scripts/rehearse-deploy.sh) in `make test`: examples/deploy/small is
// rendered; the trainer group (2 node pods, each a `moerl launch` of 1 rank here), 2 rollout
// instances (`moerl launch` of 2 ranks) and Redis run as local processes with the argv and env
// read back from the YAML, and the job must train (summary, every step, nothing lost, a reward
// per step, checkpoints and weight versions in the S3 test server). A rehearsal that misses
// its deadline or is interrupted must leave no process behind.
// NOTE: needs the multi-rank trainer and rollout roles ([rollout] ep_size, ep.size = WORLD_SIZE
// under `moerl launch`); with roles that refuse those, the role processes fail and so does this.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "base/deadline.h"
#include "base/subprocess.h"
#include "deploy/test_util.h"

namespace moerl::deploy {
namespace {

using testing::run_command;

std::string script() { return testing::source_dir() + "/scripts/rehearse-deploy.sh"; }

bool tools_present() {
  return std::filesystem::exists(testing::source_dir() + "/tools/k8s-schemas/node_modules") &&
         std::filesystem::exists(testing::source_dir() + "/tools/s3/node_modules") &&
         run_command("command -v redis-server && command -v node && command -v python3").status == 0;
}

// Processes whose command line or working directory is inside `dir`.
std::vector<std::string> processes_in(const std::string& dir) {
  std::vector<std::string> found;
  DIR* d = ::opendir("/proc");
  if (!d) return found;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::string base = std::string("/proc/") + e->d_name;
    std::ifstream in(base + "/cmdline");
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    std::error_code ec;
    std::string cwd = std::filesystem::read_symlink(base + "/cwd", ec).string();
    if (cmd.find(dir) != std::string::npos || (!ec && cwd.rfind(dir, 0) == 0)) found.push_back(std::string(e->d_name) + ": " + cmd);
  }
  ::closedir(d);
  return found;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

TEST(Rehearsal, RenderedSmallExampleTrainsAsLocalProcesses) {
  const std::string bin = env::get_or("MOERL_BIN", "");
  if (bin.empty() || !std::filesystem::exists(bin)) GTEST_SKIP() << "MOERL_BIN not built (run through ctest)";
  ASSERT_TRUE(tools_present()) << "redis-server, node, python3 and tools/*/node_modules are needed (scripts/install-deps.sh)";
  std::string work = testing::temp_dir("rehearse");
  auto t0 = std::chrono::steady_clock::now();
  auto r = run_command("MOERL_BIN='" + bin + "' bash " + script() + " --work " + work + " --timeout 150");
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.status, 0) << r.output;
  // The roles ran the rendered commands: a launcher per pod (rank counts scaled down) around
  // the trainer and rollout subcommands on the ConfigMap's app.toml, the queue URL (no
  // password: that comes from the Secret in the environment) pointed at the local Redis, which
  // runs with the StatefulSet's AOF flags and reads its password from stdin; the rendered
  // readiness probe authenticates through REDISCLI_AUTH.
  EXPECT_NE(r.output.find("trainer: " + bin + " launch --nproc-per-node 1 --grace 115 -- moerl trainer " + work +
                          "/app.toml --set runtime.queue_url=redis://127.0.0.1:"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rollout x2: " + bin + " launch --nproc-per-node 2 --grace 85 -- moerl rollout " + work +
                          "/app.toml --set runtime.queue_url=redis://127.0.0.1:"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("trainer group: 2 node pod(s) x 1 rank(s) = 2 ranks, one launcher per pod (rendered 2 x 8)"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("model.device=cpu model.dtype=float32 model.rollout_dtype=float32 ep.backend=fabric"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--appendonly yes --appendfsync always"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("password from the Secret in env REDISCLI_AUTH, on no argv"), std::string::npos) << r.output;
  const size_t probe = r.output.find("redis readiness probe (rendered, -p");
  ASSERT_NE(probe, std::string::npos) << r.output;
  EXPECT_EQ(r.output.substr(r.output.find(": ", probe) + 2, 6), "passed") << r.output;
  EXPECT_NE(r.output.find("redis refuses a client without the password (NOAUTH)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("store: s3://moerl-example-artifacts/runs/small unchanged"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rehearse-deploy: trained: 4 RL steps, accounting.lost 0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rehearse-deploy: trainer exited 0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rehearse-deploy: trainer-1 exited 0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rollout-0 exited 0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rollout-1 exited 0"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(work)) << "the rehearsal left its work directory";
  EXPECT_EQ(joined(processes_in(work)), "");
  std::printf("rehearsal took %.1f s\n", secs);
}

TEST(Rehearsal, MissedDeadlineOrInterruptLeavesNoProcessBehind) {
  const std::string bin = env::get_or("MOERL_BIN", "");
  if (bin.empty() || !std::filesystem::exists(bin)) GTEST_SKIP() << "MOERL_BIN not built (run through ctest)";
  ASSERT_TRUE(tools_present());
  // A job far too long for its deadline: fails, stops everything, shows the logs.
  std::string work = testing::temp_dir("rehearse-deadline");
  auto r = run_command("MOERL_BIN='" + bin + "' bash " + script() + " --work " + work +
                       " --timeout 8 --set train.steps=100000");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("trainer still running at the deadline"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("----- trainer:"), std::string::npos) << r.output;
  EXPECT_EQ(joined(processes_in(work)), "");

  // SIGTERM to the script while the roles run (what ctest's timeout or Ctrl-C does).
  work = testing::temp_dir("rehearse-sigterm");
  std::string log = work + ".log";
  SpawnOptions o;
  o.stdout_to = Redirect::file(log, FileMode::kTruncate);
  o.stderr_to = Redirect::to_stdout();
  o.set_env = {{"MOERL_BIN", bin}};
  o.parent_death_signal = SIGKILL;
  Subprocess rehearsal = Subprocess::spawn(
      {"bash", script(), "--work", work, "--timeout", "120", "--set", "train.steps=100000"}, o);
  bool running = false;
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60); std::chrono::steady_clock::now() < end;) {
    if (testing::read_file(log).find("rollout env (rendered)") != std::string::npos) {
      running = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(running) << testing::read_file(log);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_GE(processes_in(work).size(), 4u) << "expected redis, S3 server, trainer launchers and rollout instances running";
  rehearsal.signal(SIGTERM);
  std::optional<int> status = rehearsal.wait_for(Deadline::after_seconds(30));
  ASSERT_TRUE(status.has_value()) << "the rehearsal did not stop within 30 s of SIGTERM";
  EXPECT_TRUE(!rehearsal.killed_by_signal() && *status != 0) << testing::read_file(log);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(joined(processes_in(work)), "") << testing::read_file(log);
  EXPECT_FALSE(std::filesystem::exists(work));
  std::filesystem::remove(log);
}

}  // namespace
}  // namespace moerl::deploy
