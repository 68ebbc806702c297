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
