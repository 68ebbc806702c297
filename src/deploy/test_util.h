// Helpers shared by the deploy tests: the example configs, string surgery on them, loading a
// validated example job, running a command, and rendering into a temporary directory.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "base/env.h"
#include "base/files.h"
#include "base/subprocess.h"
#include "deploy/app_view.h"
#include "deploy/infra.h"
#include "deploy/yaml.h"

namespace moerl::deploy::testing {

inline std::string source_dir() { return env::get_or("MOERL_SOURCE_DIR", "."); }

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_file(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

inline std::string example(const std::string& name, const std::string& file) {
  return source_dir() + "/examples/deploy/" + name + "/" + file;
}

// Replaces the one occurrence of `from` (the test fails if it is not there exactly once).
inline std::string replace_once(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "'" << from << "' not found";
  if (at == std::string::npos) return text;
  EXPECT_EQ(text.find(from, at + 1), std::string::npos) << "'" << from << "' found twice";
  return text.replace(at, from.size(), to);
}

// An example job (examples/deploy/NAME), optionally with one text replacement in each file,
// validated.
struct Job {
  InfraConfig infra;
  AppView app;
};

inline Job load_job(const std::string& name, const std::string& infra_patch_from = "", const std::string& infra_patch_to = "",
         const std::string& app_patch_from = "", const std::string& app_patch_to = "") {
  std::string infra = read_file(example(name, "infra.toml"));
  if (!infra_patch_from.empty()) infra = replace_once(infra, infra_patch_from, infra_patch_to);
  std::string app = read_file(example(name, "app.toml"));
  if (!app_patch_from.empty()) app = replace_once(app, app_patch_from, app_patch_to);
  Job j{parse_infra(infra, "infra.toml"), parse_app_view(app, example(name, "app.toml"))};
  validate_infra(j.infra, j.app);
  return j;
}

// The trainer pod spec (PyTorchJob: the Master's) of render_trainer's objects.
inline const Json& trainer_pod(const std::vector<Json>& objs) {
  const Json& job = objs.back();
  if (job["kind"] == "PyTorchJob") return job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"];
  if (job["kind"] == "JobSet") return job["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"];
  return job["spec"]["template"]["spec"];
}

struct CommandResult {
  int status = -1;
  std::string output;  // stdout + stderr
};

// `cmd` through the shell, stdout and stderr together; killed after 600 s (status 137).
inline CommandResult run_command(const std::string& cmd) {
  CapturedRun c = run_captured({"/bin/sh", "-c", cmd}, Deadline::after_seconds(600));
  return {c.status, c.output};
}

inline std::string temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("moerl-deploy-test-" + std::to_string(::getpid()) + "-" + name);
  remove_tree(d);
  std::filesystem::create_directories(d);
  return d.string();
}

}  // namespace moerl::deploy::testing
