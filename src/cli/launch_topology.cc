// Resolution of `moerl launch`'s flags and the operator's environment into one topology.
#include "cli/launch_topology.h"

#include <cstdlib>

#include "base/error.h"

namespace moerl::cli {

namespace {

const char* kMultiNode =
    "e.g. moerl launch --nnodes 2 --node-rank 0 --nproc-per-node 8 --master-addr HOST --master-port 23456 -- CMD";

// A value and where it came from ("--nnodes", "PET_NNODES", ...), for messages.
struct From {
  std::string text;
  std::string name;
};

std::optional<From> pick(const std::optional<std::string>& flag, const char* flag_name,
                         const std::optional<env::EnvValue>& v) {
  if (flag) return From{*flag, flag_name};
  if (v) return From{v->value, v->name};
  return std::nullopt;
}

// "--nnodes 2" for a flag, "PET_NNODES=2" for a variable.
std::string shown(const From& f) { return f.name.rfind("-", 0) == 0 ? f.name + " " + f.text : f.name + "=" + f.text; }

int parse_int(const From& f, int lo, int hi, const std::string& what, const std::string& hint) {
  char* end = nullptr;
  const long x = std::strtol(f.text.c_str(), &end, 10);
  if (f.text.empty() || *end != '\0' || x < lo || x > hi) {
    throw Error("moerl launch: " + shown(f) + " is not " + what + " in [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "]",
                hint);
  }
  return static_cast<int>(x);
}

LaunchTopology one_node(const LaunchFlags& f) {
  const char* others[] = {"--nproc-per-node", "--nnodes", "--node-rank", "--master-addr", "--master-port"};
  const std::optional<std::string>* given[] = {&f.nproc_per_node, &f.nnodes, &f.node_rank, &f.master_addr,
                                               &f.master_port};
  for (int i = 0; i < 5; ++i) {
    if (given[i]->has_value()) {
      throw Error(std::string("moerl launch: -n ") + *f.n + " (one node's ranks) does not combine with " + others[i],
                  std::string("-n N starts N ranks on this machine; for ranks over several nodes drop -n: ") + kMultiNode);
    }
  }
  LaunchTopology t;
  t.nproc_per_node = parse_int({*f.n, "-n"}, 1, 1024, "a rank count", "e.g. moerl launch -n 2 -- moerl bench ep");
  if (f.port) t.master_port = parse_int({*f.port, "--port"}, 1, 65535, "a TCP port", "omit it to take a free port");
  return t;
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

bool LaunchTopology::loopback_master() const { return is_loopback_host(master_addr); }

LaunchTopology resolve_launch_topology(const LaunchFlags& f, const env::LaunchEnv& env) {
  if (f.n) return one_node(f);
  if (!f.nproc_per_node) {
    throw Error("moerl launch: no rank count (neither -n nor --nproc-per-node)",
                std::string("one machine: moerl launch -n 2 -- CMD; several nodes: ") + kMultiNode);
  }
  if (f.port) {
    throw Error("moerl launch: --port is -n's flag; with --nproc-per-node the group's port is --master-port",
                "write --master-port " + *f.port);
  }
  LaunchTopology t;
  t.nproc_per_node = parse_int({*f.nproc_per_node, "--nproc-per-node"}, 1, 1024, "a rank count per node",
                               "give the GPUs of one node, e.g. --nproc-per-node 8");
  const std::optional<From> nnodes = pick(f.nnodes, "--nnodes", env.nnodes);
  const std::optional<From> node_rank = pick(f.node_rank, "--node-rank", env.node_rank);
  const std::optional<From> addr = pick(f.master_addr, "--master-addr", env.master_addr);
  const std::optional<From> port = pick(f.master_port, "--master-port", env.master_port);
  const std::string env_hint = "pass the flag, or check what the operator sets on the pod (PET_NNODES, "
                               "PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT, else WORLD_SIZE, RANK, MASTER_*)";
  if (nnodes) {
    if (nnodes->text.find(':') != std::string::npos) {
      throw Error("moerl launch: " + shown(*nnodes) + " is an elastic range; a moerl group has a fixed node count",
                  "render the job without elasticPolicy, or pass --nnodes N");
    }
    t.nnodes = parse_int(*nnodes, 1, 4096, "a node count", env_hint);
  }
  if (node_rank) t.node_rank = parse_int(*node_rank, 0, 4095, "a node rank", env_hint);
  if (t.node_rank >= t.nnodes) {
    throw Error("moerl launch: " + (node_rank ? shown(*node_rank) : "--node-rank 0") + " must be < " +
                    (nnodes ? shown(*nnodes) : "--nnodes 1") + " (node ranks are 0.." + std::to_string(t.nnodes - 1) + ")",
                "give each node's launcher its own --node-rank below --nnodes; " + env_hint);
  }
  if (addr) {
    t.master_addr = addr->text;
  } else if (t.nnodes > 1) {
    throw Error("moerl launch: no master address for " + std::to_string(t.nnodes) +
                    " nodes (rank 0 serves the group's TCPStore there)",
                "pass --master-addr HOST (node rank 0's address, the same on every node) or set PET_MASTER_ADDR / "
                "MASTER_ADDR");
  }
  if (port) {
    t.master_port = parse_int(*port, 1, 65535, "a TCP port", env_hint);
  } else if (t.nnodes > 1 || !t.loopback_master()) {
    throw Error("moerl launch: no master port for the group at " + t.master_addr,
                "pass --master-port P (the same on every node) or set PET_MASTER_PORT / MASTER_PORT");
  }
  if (static_cast<int64_t>(t.nnodes) * t.nproc_per_node > 65536) {
    throw Error("moerl launch: " + std::to_string(t.nnodes) + " nodes x " + std::to_string(t.nproc_per_node) +
                    " ranks is more than 65536 ranks",
                "check --nnodes and --nproc-per-node");
  }
  return t;
}

}  // namespace moerl::cli
