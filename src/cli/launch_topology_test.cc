// resolve_launch_topology: flags over the operator's environment (PET_* over the node-level
// WORLD_SIZE/RANK/MASTER_*), one-node defaults, and errors that name the flag or variable.
#include "cli/launch_topology.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace moerl::cli {
namespace {

std::string error_of(const LaunchFlags& f, const env::LaunchEnv& e = {}) {
  try {
    resolve_launch_topology(f, e);
    return "";
  } catch (const Error& err) {
    return err.what();
  }
}

TEST(LaunchTopology, OneNodeFormIgnoresTheEnvironment) {
  env::LaunchEnv pod;
  pod.nnodes = env::EnvValue{"4", "WORLD_SIZE"};
  pod.master_addr = env::EnvValue{"trainer-0", "MASTER_ADDR"};
  LaunchTopology t = resolve_launch_topology({.n = "3"}, pod);
  EXPECT_EQ(t.nnodes, 1);
  EXPECT_EQ(t.world_size(), 3);
  EXPECT_EQ(t.global_rank(2), 2);
  EXPECT_EQ(t.master_addr, "127.0.0.1");
  EXPECT_EQ(t.master_port, 0);  // a free port, picked by the launcher
  EXPECT_TRUE(t.loopback_master());
  EXPECT_EQ(resolve_launch_topology({.n = "2", .port = "29511"}, {}).master_port, 29511);
}

TEST(LaunchTopology, FlagsGiveGlobalRanksNodeMajor) {
  LaunchTopology t = resolve_launch_topology(
      {.nproc_per_node = "8", .nnodes = "16", .node_rank = "3", .master_addr = "10.1.2.3", .master_port = "23456"}, {});
  EXPECT_EQ(t.world_size(), 128);
  EXPECT_EQ(t.global_rank(0), 24);
  EXPECT_EQ(t.global_rank(7), 31);
  EXPECT_EQ(t.master_addr, "10.1.2.3");
  EXPECT_EQ(t.master_port, 23456);
  EXPECT_FALSE(t.loopback_master());
}

TEST(LaunchTopology, KubeflowPetVariablesComeBeforeTheNodeLevelOnes) {
  env::LaunchEnv pod;  // what launch_env() returns in a PyTorchJob pod
  pod.nnodes = env::EnvValue{"2", "PET_NNODES"};
  pod.node_rank = env::EnvValue{"1", "PET_NODE_RANK"};
  pod.master_addr = env::EnvValue{"moerl-trainer-master-0", "PET_MASTER_ADDR"};
  pod.master_port = env::EnvValue{"23456", "PET_MASTER_PORT"};
  LaunchTopology t = resolve_launch_topology({.nproc_per_node = "4"}, pod);
  EXPECT_EQ(t.nnodes, 2);
  EXPECT_EQ(t.node_rank, 1);
  EXPECT_EQ(t.global_rank(0), 4);
  EXPECT_EQ(t.master_addr, "moerl-trainer-master-0");
  // A flag overrides the environment.
  EXPECT_EQ(resolve_launch_topology({.nproc_per_node = "4", .node_rank = "0"}, pod).node_rank, 0);
}

TEST(LaunchTopology, OneNodeWithoutEnvironmentIsLoopbackWithAFreePort) {
  LaunchTopology t = resolve_launch_topology({.nproc_per_node = "2"}, {});
  EXPECT_EQ(t.nnodes, 1);
  EXPECT_EQ(t.master_addr, "127.0.0.1");
  EXPECT_EQ(t.master_port, 0);
}

TEST(LaunchTopology, InconsistentInputIsRefusedNamingItsSource) {
  env::LaunchEnv pod;
  pod.nnodes = env::EnvValue{"2", "WORLD_SIZE"};
  pod.node_rank = env::EnvValue{"2", "RANK"};
  std::string e = error_of({.nproc_per_node = "8", .master_addr = "a", .master_port = "1"}, pod);
  EXPECT_NE(e.find("RANK=2 must be < WORLD_SIZE=2"), std::string::npos) << e;
  EXPECT_NE(e.find("HINT"), std::string::npos) << e;
  e = error_of({.nproc_per_node = "8", .nnodes = "2", .master_port = "1"});
  EXPECT_NE(e.find("no master address for 2 nodes"), std::string::npos) << e;
  e = error_of({.nproc_per_node = "8", .nnodes = "2", .master_addr = "10.0.0.1"});
  EXPECT_NE(e.find("no master port for the group at 10.0.0.1"), std::string::npos) << e;
  e = error_of({.n = "2", .nnodes = "2"});
  EXPECT_NE(e.find("-n 2 (one node's ranks) does not combine with --nnodes"), std::string::npos) << e;
  e = error_of({.port = "1", .nproc_per_node = "2"});
  EXPECT_NE(e.find("--port is -n's flag"), std::string::npos) << e;
  e = error_of({});
  EXPECT_NE(e.find("no rank count"), std::string::npos) << e;
  e = error_of({.nproc_per_node = "0"});
  EXPECT_NE(e.find("--nproc-per-node 0 is not a rank count per node in [1, 1024]"), std::string::npos) << e;
  env::LaunchEnv elastic;
  elastic.nnodes = env::EnvValue{"1:4", "PET_NNODES"};
  e = error_of({.nproc_per_node = "8"}, elastic);
  EXPECT_NE(e.find("PET_NNODES=1:4 is an elastic range"), std::string::npos) << e;
  env::LaunchEnv bad_port;
  bad_port.master_port = env::EnvValue{"http", "MASTER_PORT"};
  e = error_of({.nproc_per_node = "8"}, bad_port);
  EXPECT_NE(e.find("MASTER_PORT=http is not a TCP port"), std::string::npos) << e;
}

TEST(LaunchTopology, LoopbackHosts) {
  EXPECT_TRUE(is_loopback_host("127.0.0.1"));
  EXPECT_TRUE(is_loopback_host("127.0.1.1"));
  EXPECT_TRUE(is_loopback_host("localhost"));
  EXPECT_TRUE(is_loopback_host("::1"));
  EXPECT_FALSE(is_loopback_host("10.0.0.1"));
  EXPECT_FALSE(is_loopback_host("moerl-trainer-master-0"));
}

}  // namespace
}  // namespace moerl::cli
