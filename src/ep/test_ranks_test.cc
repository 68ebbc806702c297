// The worker side of the multi-process harness (test_ranks.h) and the spawner. The
// EpWorker.Scenario test does nothing unless a parent test started this process as a rank.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ATen/Parallel.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "ep/test_ranks.h"

namespace moerl::ep::testing {

std::map<std::string, Scenario>& scenarios() {
  static std::map<std::string, Scenario> m;
  return m;
}

static int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

std::vector<int> run_ranks(const std::string& scenario, int world_size,
                           const std::map<std::string, std::string>& env, double timeout_s) {
  const std::string port = std::to_string(free_port());
  std::vector<pid_t> pids;
  for (int r = 0; r < world_size; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", port.c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(world_size).c_str(), 1);
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("OMP_NUM_THREADS", "1", 1);
      setenv("FI_TCP_IFACE", "lo", 1);
      setenv("FI_SOCKETS_IFACE", "lo", 1);
      setenv("MOERL_EP_TEST_SCENARIO", scenario.c_str(), 1);
      for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
      execl("/proc/self/exe", "moerl_ep_tests", "--gtest_filter=EpWorker.Scenario", "--gtest_brief=1",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    pids.push_back(pid);
  }
  std::vector<int> status(world_size, -2);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int left = world_size;
  while (left > 0) {
    for (int r = 0; r < world_size; ++r) {
      if (status[r] != -2) continue;
      int st = 0;
      if (waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        --left;
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < world_size; ++r) {
        if (status[r] != -2) continue;
        kill(pids[r], SIGKILL);
        waitpid(pids[r], nullptr, 0);
        status[r] = -1;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return status;
}

TEST(EpWorker, Scenario) {
  const char* name = std::getenv("MOERL_EP_TEST_SCENARIO");
  if (name == nullptr) GTEST_SKIP() << "runs only as a rank started by a multi-process test";
  at::set_num_threads(1);
  auto it = scenarios().find(name);
  ASSERT_NE(it, scenarios().end()) << "unknown scenario " << name;
  it->second();
}

}  // namespace moerl::ep::testing
