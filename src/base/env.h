// The one place moerl reads environment variables. Every variable moerl understands is
// listed in env.cc's table (name, meaning) and printed by `moerl env`.
//
//   auto rdv = env::rendezvous();   // MASTER_ADDR/PORT, WORLD_SIZE, RANK (+ PET_* variants)
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
