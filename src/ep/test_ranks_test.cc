// The worker side of the multi-process harness (test_ranks.h) and the spawner. The
// EpWorker.Scenario test does nothing unless a parent test started this process as a rank.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ATen/Parallel.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "base/deadline.h"
#include "base/subprocess.h"
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
  std::vector<Subprocess> ranks;
  for (int r = 0; r < world_size; ++r) {
    SpawnOptions o;
    o.set_env = {{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}, {"WORLD_SIZE", std::to_string(world_size)},
                 {"RANK", std::to_string(r)}, {"LOCAL_RANK", std::to_string(r)}, {"OMP_NUM_THREADS", "1"},
                 {"FI_TCP_IFACE", "lo"}, {"FI_SOCKETS_IFACE", "lo"}, {"MOERL_EP_TEST_SCENARIO", scenario}};
    o.set_env.insert(o.set_env.end(), env.begin(), env.end());
    ranks.push_back(Subprocess::spawn({"/proc/self/exe", "--gtest_filter=EpWorker.Scenario", "--gtest_brief=1"}, o));
  }
  // -1: still running at the deadline (then SIGKILLed).
  Deadline deadline = Deadline::after_seconds(timeout_s);
  std::vector<int> status;
  for (Subprocess& rank : ranks) status.push_back(rank.wait_or_kill(deadline).value_or(-1));
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
