// Shared by the async job tests: a tiny job config (the demo's model, shrunk further) written
// to a temp file, and temp-dir handling.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

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
inline pid_t spawn_moerl(const std::vector<std::string>& args, const std::string& log) {
  std::string bin = moerl_bin();
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    std::vector<std::string> argv = {bin};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> c;
    for (auto& a : argv) c.push_back(a.data());
    c.push_back(nullptr);
    execv(bin.c_str(), c.data());
    _exit(127);
  }
  return pid;
}

// Exit status (WEXITSTATUS, or 128 + signal) once `pid` exits; -1 if it is still running at the
// deadline (then it is killed).
inline int wait_exit(pid_t pid, double seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  while (true) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (std::chrono::steady_clock::now() >= end) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

inline bool exited(pid_t pid, int* code) {
  int status = 0;
  if (waitpid(pid, &status, WNOHANG) != pid) return false;
  *code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return true;
}

}  // namespace moerl::train::testing
