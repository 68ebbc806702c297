// `moerl launch` as a pod's PID 1 child: SIGTERM is forwarded to every rank and the launcher
// exits with the ranks' own status (0 after a clean drain, as `moerl rollout` exits on a Spot
// notice; 128 + 15 for ranks the signal ended); a launcher killed outright (SIGKILL, an OOM
// kill) takes its ranks along. Needs MOERL_BIN (set by ctest).
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/deadline.h"
#include "base/env.h"
#include "base/subprocess.h"

namespace moerl::cli {
namespace {

std::string bin() { return env::get_or("MOERL_BIN", ""); }

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("moerl-launch-sig-" + std::to_string(::getpid()) + "-" + name)).string();
}

// A launcher of `ranks` ranks running `script`, its output in a file; returns once every rank
// has printed "pid=<its pid>", with those pids.
struct Running {
  Subprocess launcher;
  std::string log;
  std::vector<pid_t> ranks;
};

Running start(const std::vector<std::string>& launch_flags, int ranks, const std::string& script, const std::string& name) {
  Running r;
  r.log = temp_path(name + ".log");
  SpawnOptions o;
  o.stdout_to = Redirect::file(r.log, FileMode::kTruncate);
  o.stderr_to = Redirect::to_stdout();
  o.parent_death_signal = SIGKILL;
  o.unset_env = {"PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT",
                 "WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT"};  // one node, loopback
  std::vector<std::string> argv = {bin(), "launch"};
  argv.insert(argv.end(), launch_flags.begin(), launch_flags.end());
  argv.insert(argv.end(), {"--", "sh", "-c", "echo pid=$$; " + script});
  r.launcher = Subprocess::spawn(argv, o);
  static const std::regex kPid("pid=([0-9]+)");
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       static_cast<int>(r.ranks.size()) < ranks && std::chrono::steady_clock::now() < end;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    r.ranks.clear();
    const std::string out = read_file(r.log);
    for (std::sregex_iterator it(out.begin(), out.end(), kPid), e; it != e; ++it) {
      r.ranks.push_back(static_cast<pid_t>(std::stol((*it)[1])));
    }
  }
  EXPECT_EQ(static_cast<int>(r.ranks.size()), ranks) << read_file(r.log);
  return r;
}

// A rank's state from /proc: "" once it is gone, "Z" while a zombie nobody has reaped yet.
std::string process_state(pid_t pid) {
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  size_t close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ? "" : stat.substr(close + 2, 1);
}

bool alive(pid_t pid) {
  const std::string st = process_state(pid);
  return !st.empty() && st != "Z";
}

TEST(LaunchSignals, AKilledLauncherTakesItsRanksAlong) {
  if (bin().empty() || !std::filesystem::exists(bin())) GTEST_SKIP() << "MOERL_BIN not built (run through ctest)";
  Running r = start({"-n", "2"}, 2, "exec sleep 300", "killed");
  ASSERT_EQ(r.ranks.size(), 2u);
  r.launcher.kill();  // SIGKILL: the launcher forwards nothing
  std::vector<std::string> left;
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10); std::chrono::steady_clock::now() < end;) {
    left.clear();
    for (pid_t p : r.ranks) {
      if (alive(p)) left.push_back(std::to_string(p) + " (" + process_state(p) + ")");
    }
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (pid_t p : r.ranks) {
    if (alive(p)) ::kill(p, SIGKILL);  // the ranks this test started
  }
  EXPECT_TRUE(left.empty()) << "ranks outlived their SIGKILLed launcher: " << left.size() << " left, e.g. " << left[0];
  std::filesystem::remove(r.log);
}

// What tini does on a pod's SIGTERM: the launcher forwards it to every rank; ranks that drain
// and exit 0 make the launcher exit 0, ranks the signal ends make it exit 128 + 15.
TEST(LaunchSignals, SigtermIsForwardedAndTheRanksStatusIsTheLaunchers) {
  if (bin().empty() || !std::filesystem::exists(bin())) GTEST_SKIP() << "MOERL_BIN not built (run through ctest)";
  const std::string drain = "trap 'echo drained; exit 0' TERM; while true; do sleep 0.1; done";
  for (const auto& flags : {std::vector<std::string>{"-n", "2"}, std::vector<std::string>{"--nproc-per-node", "2"}}) {
    SCOPED_TRACE(flags[0]);
    Running r = start(flags, 2, drain, "drain");
    ASSERT_EQ(r.ranks.size(), 2u);
    r.launcher.signal(SIGTERM);
    std::optional<int> st = r.launcher.wait_or_kill(Deadline::after_seconds(20));
    const std::string out = read_file(r.log);
    EXPECT_EQ(st, std::optional<int>(0)) << out;
    EXPECT_NE(out.find("[rank 0] drained"), std::string::npos) << out;
    EXPECT_NE(out.find("[rank 1] drained"), std::string::npos) << out;
    std::filesystem::remove(r.log);
  }
  Running r = start({"-n", "2"}, 2, "exec sleep 300", "term");
  ASSERT_EQ(r.ranks.size(), 2u);
  r.launcher.signal(SIGTERM);
  EXPECT_EQ(r.launcher.wait_or_kill(Deadline::after_seconds(20)), std::optional<int>(128 + SIGTERM)) << read_file(r.log);
  std::filesystem::remove(r.log);
}

}  // namespace
}  // namespace moerl::cli
