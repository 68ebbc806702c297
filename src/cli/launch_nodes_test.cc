// `moerl launch` across nodes, on one machine: two launchers (node ranks 0 and 1, two ranks
// each) form ONE world of 4 ranks around one master; the operator's environment (PET_*, or
// the node-level WORLD_SIZE/RANK/MASTER_*) gives the defaults; inconsistent flags are refused.
// Needs MOERL_BIN (set by ctest).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/env.h"
#include "base/subprocess.h"

namespace moerl::cli {
namespace {

std::string bin() { return env::get_or("MOERL_BIN", ""); }

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("moerl-launch-" + std::to_string(::getpid()) + "-" + name)).string();
}

const std::vector<std::string> kRendezvousEnv = {"PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT",
                                                 "WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT"};

// One launcher per "node", all started before any is waited for (rank 0's TCPStore must see
// every rank of both). Returns each launcher's exit status and output.
struct NodeRun {
  int status = -1;
  std::string output;
};

std::vector<NodeRun> run_nodes(const std::vector<std::vector<std::string>>& argvs,
                               std::vector<std::pair<std::string, std::string>> env = {}) {
  std::vector<Subprocess> procs;
  std::vector<std::string> logs;
  for (size_t i = 0; i < argvs.size(); ++i) {
    logs.push_back(temp_path("node" + std::to_string(i) + ".log"));
    SpawnOptions o;
    o.stdout_to = Redirect::file(logs.back(), FileMode::kTruncate);
    o.stderr_to = Redirect::to_stdout();
    o.unset_env = kRendezvousEnv;  // only what the test sets
    o.set_env = env;
    o.parent_death_signal = SIGKILL;
    procs.push_back(Subprocess::spawn(argvs[i], o));
  }
  std::vector<NodeRun> out(argvs.size());
  for (size_t i = 0; i < procs.size(); ++i) {
    std::optional<int> st = procs[i].wait_or_kill(Deadline::after_seconds(180));
    out[i].status = st ? *st : -1;
    out[i].output = read_file(logs[i]);
    std::filesystem::remove(logs[i]);
  }
  return out;
}

std::vector<std::string> node_argv(int node_rank, int port, const std::vector<std::string>& cmd) {
  std::vector<std::string> a = {bin(), "launch", "--nnodes", "2", "--node-rank", std::to_string(node_rank),
                                "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port",
                                std::to_string(port), "--"};
  a.insert(a.end(), cmd.begin(), cmd.end());
  return a;
}

const std::vector<std::string> kPrintRank = {
    "sh", "-c",
    "echo r=$RANK w=$WORLD_SIZE l=$LOCAL_RANK lw=$LOCAL_WORLD_SIZE g=$GROUP_RANK a=$MASTER_ADDR p=$MASTER_PORT "
    "fi=${FI_TCP_IFACE:-unset}"};

TEST(LaunchNodes, TwoLaunchersGiveFourRanksOneNumbering) {
  if (bin().empty() || !std::filesystem::exists(bin())) GTEST_SKIP() << "MOERL_BIN not built (run through ctest)";
  const int port = free_port();
  std::vector<NodeRun> r = run_nodes({node_argv(0, port, kPrintRank), node_argv(1, port, kPrintRank)});
  for (int node = 0; node < 2; ++node) {
    SCOPED_TRACE("node " + std::to_string(node));
    ASSERT_EQ(r[node].status, 0) << r[node].output;
    for (int local = 0; local < 2; ++local) {
      const int rank = node * 2 + local;
      // Lines are prefixed with the GLOBAL rank; the master is loopback, so libfabric's
      // socket providers are told to use lo.
      const std::string line = "[rank " + std::to_string(rank) + "] r=" + std::to_string(rank) + " w=4 l=" +
                               std::to_string(local) + " lw=2 g=" + std::to_string(node) +
                               " a=127.0.0.1 p=" + std::to_string(port) + " fi=lo\n";
      EXPECT_NE(r[node].output.find(line), std::string::npos) << r[node].output;
    }
  }
}

// The ranks of both launchers really are one world: `moerl bench ep` over the fabric
// transport (tcp on lo) rendezvous at node 0's rank 0, which alone prints the result.
TEST(LaunchNodes, TwoLaunchersFormOneEpWorld) {
  if (bin().empty() || !std::filesystem::exists(bin())) GTEST_SKIP() << "MOERL_BIN not built (run through ctest)";
  const int port = free_port();
  const std::vector<std::string> bench = {"moerl", "bench", "ep", "--backend", "fabric", "--provider", "tcp",
                                          "--tokens", "32", "--hidden", "64", "--experts", "8", "--topk", "2",
                                          "--dtype", "fp32", "--warmup", "1", "--iters", "2", "--json"};
  std::vector<NodeRun> r = run_nodes({node_argv(0, port, bench), node_argv(1, port, bench)}, {{"OMP_NUM_THREADS", "1"}});
  ASSERT_EQ(r[0].status, 0) << r[0].output;
  ASSERT_EQ(r[1].status, 0) << r[1].output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r[0].output, m, std::regex("\\[rank 0\\] \\{.*\"ranks\":([0-9]+)"))) << r[0].output;
  EXPECT_EQ(m[1], "4") << r[0].output;
  EXPECT_NE(r[0].output.find("\"verified\":true"), std::string::npos) << r[0].output;
  EXPECT_EQ(r[1].output.find("\"ranks\""), std::string::npos) << "only global rank 0 reports:\n" << r[1].output;
}

// Without flags, a pod's launcher takes nnodes / node rank / master from the operator's env:
// Kubeflow's PET_* first, else the node-level WORLD_SIZE / RANK / MASTER_* (a PyTorchJob with
// nprocPerNode "1", a JobSet or an Indexed Job).
TEST(LaunchNodes, NodeShapeComesFromTheOperatorsEnvironment) {
  if (bin().empty() || !std::filesystem::exists(bin())) GTEST_SKIP() << "MOERL_BIN not built (run through ctest)";
  std::vector<std::string> argv = {bin(), "launch", "--nproc-per-node", "2", "--"};
  argv.insert(argv.end(), kPrintRank.begin(), kPrintRank.end());
  std::vector<NodeRun> pet = run_nodes({argv}, {{"PET_NNODES", "3"}, {"PET_NODE_RANK", "2"},
                                               {"PET_MASTER_ADDR", "trainer-master-0"}, {"PET_MASTER_PORT", "23456"},
                                               {"WORLD_SIZE", "99"}, {"RANK", "98"}});
  ASSERT_EQ(pet[0].status, 0) << pet[0].output;
  // Not a loopback master: FI_TCP_IFACE is left to the pod.
  EXPECT_NE(pet[0].output.find("[rank 5] r=5 w=6 l=1 lw=2 g=2 a=trainer-master-0 p=23456 fi=unset\n"), std::string::npos)
      << pet[0].output;
  std::vector<NodeRun> node_level = run_nodes({argv}, {{"WORLD_SIZE", "2"}, {"RANK", "1"},
                                                      {"MASTER_ADDR", "moerl-trainer-0.moerl-trainer"}, {"MASTER_PORT", "23456"}});
  ASSERT_EQ(node_level[0].status, 0) << node_level[0].output;
  EXPECT_NE(node_level[0].output.find("[rank 2] r=2 w=4 l=0 lw=2 g=1 a=moerl-trainer-0.moerl-trainer p=23456 fi=unset\n"),
            std::string::npos) << node_level[0].output;
}

TEST(LaunchNodes, InconsistentFlagsAreRefusedNamingThem) {
  if (bin().empty() || !std::filesystem::exists(bin())) GTEST_SKIP() << "MOERL_BIN not built (run through ctest)";
  SpawnOptions clean;
  clean.unset_env = kRendezvousEnv;
  CapturedRun r = run_captured({bin(), "launch", "--nnodes", "2", "--node-rank", "2", "--nproc-per-node", "1",
                                "--master-addr", "10.0.0.1", "--master-port", "23456", "--", "true"},
                               Deadline::after_seconds(30), clean);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--node-rank 2 must be < --nnodes 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("HINT"), std::string::npos) << r.output;
  r = run_captured({bin(), "launch", "--nnodes", "2", "--nproc-per-node", "1", "--", "true"}, Deadline::after_seconds(30),
                   clean);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("no master address"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace moerl::cli
