// Shared by the async job tests: a tiny job config (the demo's model, shrunk further) written
// to a temp file, temp-dir handling, and `moerl` child processes (base/subprocess).
#pragma once

#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/subprocess.h"
#include "job/job_config.h"

namespace moerl::train::testing {
using namespace moerl::job;

inline std::string make_temp_dir(const std::string& tag) {
  std::string tmpl = "/tmp/moerl-" + tag + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  char* d = mkdtemp(buf.data());
  return d ? std::string(d) : std::string();
}

// `extra` is appended (extra [runtime] keys etc. go in as TOML).
inline std::string tiny_config_text(const std::string& runtime_lines, const std::string& extra = "") {
  return R"([model]
init = "random"
arch = "qwen3_moe"
hidden_size = 32
num_hidden_layers = 1
num_attention_heads = 2
num_key_value_heads = 1
num_experts = 4
num_experts_per_tok = 2
moe_intermediate_size = 32
max_position_embeddings = 64
seed = 3

[task]
name = "addition"
digits = 2
seed = 1

[algorithm]
algorithm = "grpo"
group_size = 4
behaviour_correction = "tis"

[rollout]
prompts_per_step = 4
max_new_tokens = 4
num_workers = 1

[train]
sft_steps = 0
steps = 4
eval_prompts = 16
micro_batch_size = 64
seed = 1

[runtime]
)" + runtime_lines + "\n" + extra;
}

inline std::string write_config(const std::string& dir, const std::string& text) {
  std::string path = (std::filesystem::path(dir) / "job.toml").string();
  std::ofstream(path) << text;
  return path;
}

inline std::string moerl_bin() {
  const char* b = std::getenv("MOERL_BIN");
  return b ? b : "";
}

// Starts MOERL_BIN with `args`, stdout+stderr appended to `log`; the child dies with the test.
inline Subprocess spawn_moerl(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> argv = {moerl_bin()};
  argv.insert(argv.end(), args.begin(), args.end());
  return Subprocess::spawn(argv, {.stdout_to = Redirect::file(log, FileMode::kAppend),
                                  .stderr_to = Redirect::to_stdout(),
                                  .parent_death_signal = SIGKILL});
}

// Exit status (exit code, or 128 + signal) once `p` exits; -1 if it is still running at the
// deadline (then it is killed).
inline int wait_exit(Subprocess& p, double seconds) {
  return p.wait_or_kill(Deadline::after_seconds(seconds)).value_or(-1);
}

inline bool exited(Subprocess& p, int* code) {
  std::optional<int> status = p.poll();
  if (status) *code = *status;
  return status.has_value();
}

}  // namespace moerl::train::testing
