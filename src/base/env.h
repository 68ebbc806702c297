// The one place moerl reads environment variables. Every variable moerl understands is
// listed in env.cc's table (name, meaning) and printed by `moerl env`.
//
//   auto rdv = env::rendezvous();   // MASTER_ADDR/PORT, WORLD_SIZE, RANK (+ PET_* variants)
//   auto pod = env::launch_env();   // what an operator tells a node's launcher
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace moerl::env {

std::optional<std::string> get(const char* name);
std::string get_or(const char* name, const std::string& fallback);
// Integer variable; a set-but-malformed value is an Error naming the variable.
long get_int_or(const char* name, long fallback);

// torchrun / Kubeflow rendezvous conventions.
struct Rendezvous {
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int world_size = 1;
  int rank = 0;
  int local_rank = 0;
};
Rendezvous rendezvous();
// LOCAL_WORLD_SIZE (ranks per node, set by `moerl launch`); nullopt when unset or empty. A
// malformed value is an Error naming the variable; the range is the caller's to check.
std::optional<long> local_world_size();

// A set variable and its name (for messages).
struct EnvValue {
  std::string value;
  std::string name;
};

// What an operator tells a node-level launcher (`moerl launch --nproc-per-node G`, one per
// pod): Kubeflow's PET_NNODES / PET_NODE_RANK / PET_MASTER_ADDR / PET_MASTER_PORT, else the
// node-level WORLD_SIZE / RANK / MASTER_ADDR / MASTER_PORT that a PyTorchJob with nprocPerNode
// "1", a JobSet or an Indexed Job sets (there WORLD_SIZE counts nodes, RANK is the node's).
// Unparsed: the launcher validates and names the variable. nullopt = unset or empty.
struct LaunchEnv {
  std::optional<EnvValue> nnodes, node_rank, master_addr, master_port;
};
LaunchEnv launch_env();

// Directory holding the real Hugging Face tokenizer files the tests read
// (<name>/tokenizer.json, filled by scripts/install-deps.sh): MOERL_TOKENIZER_DATA, else
// `fallback`.
std::string tokenizer_data_dir(const std::string& fallback);

struct Known {
  const char* name;
  const char* meaning;
};
const std::vector<Known>& known_variables();

}  // namespace moerl::env
