// The shape of one `moerl launch`: how many ranks this launcher starts and where they sit in
// the whole group (torchrun's nnodes / node_rank / nproc_per_node / master). Resolved from
// the flags, then from the environment an operator sets on the pod (env::launch_env()), then
// one-node defaults. Pure: tests pass flags and environment as values.
//
//   LaunchTopology t = resolve_launch_topology(flags, env::launch_env());
//   for (int local = 0; local < t.nproc_per_node; ++local) start(t.global_rank(local), t.world_size());
// Plain data; not shared between threads. Inconsistent input throws Error naming the flag or
// variable each value came from, with a HINT.
#pragma once

#include <optional>
#include <string>

#include "base/env.h"

namespace moerl::cli {

// The flags as given (unparsed: errors name them); nullopt = not given.
struct LaunchFlags {
  std::optional<std::string> n;     // -n N: one node, N ranks, loopback master (the original form)
  std::optional<std::string> port;  // --port P, with -n
  std::optional<std::string> nproc_per_node, nnodes, node_rank, master_addr, master_port;
};

struct LaunchTopology {
  int nnodes = 1;
  int node_rank = 0;
  int nproc_per_node = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: pick a free loopback port (one node with a loopback master only)

  int world_size() const { return nnodes * nproc_per_node; }
  int global_rank(int local_rank) const { return node_rank * nproc_per_node + local_rank; }
  // All ranks on this machine: libfabric's socket providers must then bind to lo.
  bool loopback_master() const;
};

LaunchTopology resolve_launch_topology(const LaunchFlags& flags, const env::LaunchEnv& env);

// 127.0.0.0/8, ::1 or "localhost".
bool is_loopback_host(const std::string& host);

}  // namespace moerl::cli
