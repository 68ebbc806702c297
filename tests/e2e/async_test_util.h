// Shared by the async job tests: a tiny job config (the demo's model, shrunk further) written
// to a temp file, temp-dir handling, and `moerl` child processes (base/subprocess).
#pragma once

#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/deadline.h"
#include "base/subprocess.h"
#include "e2e/tiny_job.h"
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

// The async variant of the tiny-job preset (e2e/tiny_job.h) with `overrides`, then a
// [runtime] table of `runtime_lines`, then `extra` (other tables, e.g. [runtime.spot]).
inline std::string tiny_config_text(const std::string& runtime_lines, const std::string& extra = "",
                                    const std::vector<std::string>& overrides = {}) {
  return e2e::tiny_job_text(e2e::plus(e2e::kAsyncTiny, overrides)) + "\n[runtime]\n" + runtime_lines + "\n" + extra;
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

// Like spawn_moerl, but MOERL_BIN runs as PID 1 of its own PID namespace (`unshare -Urpf
// --mount-proc --kill-child`), as a pod's process does: every such child has the same PID.
// `unset_env` is removed from its environment (e.g. POD_NAME, so the hostname is used).
inline Subprocess spawn_moerl_in_pid_namespace(const std::vector<std::string>& args, const std::string& log,
                                               const std::vector<std::string>& unset_env = {}) {
  std::vector<std::string> argv = {"unshare", "-Urpf", "--mount-proc", "--kill-child", moerl_bin()};
  argv.insert(argv.end(), args.begin(), args.end());
  return Subprocess::spawn(argv, {.stdout_to = Redirect::file(log, FileMode::kAppend),
                                  .stderr_to = Redirect::to_stdout(),
                                  .unset_env = unset_env,
                                  .parent_death_signal = SIGKILL});
}

// True when `unshare -Urpf --mount-proc` works here (user namespaces may be disabled).
inline bool pid_namespaces_available() {
  return std::system("unshare -Urpf --mount-proc sh -c 'test $$ = 1' >/dev/null 2>&1") == 0;
}

// Exit status (exit code, or 128 + signal) once `p` exits; -1 if it is still running at the
// deadline (then it is killed).
inline int wait_exit(Subprocess& p, double seconds) {
  return p.wait_or_kill(Deadline::after_seconds(seconds)).value_or(-1);
}

// A file's whole text ("" when it does not exist): logs for failure messages.
inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The last `bytes` of a log file, for a failure message that explains itself in CI.
inline std::string log_tail(const std::string& path, size_t bytes = 3000) {
  const std::string text = read_text(path);
  return "--- " + path + " (tail) ---\n" + (text.size() > bytes ? text.substr(text.size() - bytes) : text);
}

// The [runtime] lines of an async job over `queue_url` in namespace `ns`, with leases long
// enough that a busy 2-core box never lets one expire, and max_staleness 8: a run of fewer
// than 9 steps never drops a record as stale (a longer one may, when the box is busy).
inline std::string async_runtime_text(const std::string& queue_url, const std::string& ns) {
  return "mode = \"async\"\nqueue_url = \"" + queue_url + "\"\nnamespace = \"" + ns +
         "\"\nlease_seconds = 20\nmax_staleness = 8\ndrain_seconds = 10\ncall_timeout_seconds = 10\n";
}

// The newest RL step in a run's metrics.jsonl so far (0 before the first; a torn last line
// is skipped).
inline int64_t rl_steps_done(const std::string& metrics) {
  int64_t n = 0;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.value("phase", "") == "rl") n = std::max<int64_t>(n, j.value("step", 0));
  }
  return n;
}

// Times each task id appears in RUN/trained.jsonl.
inline std::map<std::string, int> trained_counts(const std::string& run) {
  std::map<std::string, int> out;
  std::istringstream lines(read_text(run + "/trained.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) ++out[nlohmann::json::parse(line).at("task_id").get<std::string>()];
  }
  return out;
}

// A finished async run in RUN: `steps` RL steps, lost = 0 in its accounting, and each of its
// `tasks` tasks trained exactly once (trained.jsonl).
inline void expect_each_task_trained_once(const std::string& run, int64_t steps, size_t tasks) {
  EXPECT_EQ(rl_steps_done(run + "/metrics.jsonl"), steps);
  nlohmann::json summary = nlohmann::json::parse(read_text(run + "/summary.json"));
  EXPECT_EQ(summary["accounting"]["lost"], 0) << summary["accounting"].dump(2);
  std::map<std::string, int> trained = trained_counts(run);
  EXPECT_EQ(trained.size(), tasks);
  for (const auto& [task, n] : trained) EXPECT_EQ(n, 1) << task;
}

inline bool exited(Subprocess& p, int* code) {
  std::optional<int> status = p.poll();
  if (status) *code = *status;
  return status.has_value();
}

}  // namespace moerl::train::testing
