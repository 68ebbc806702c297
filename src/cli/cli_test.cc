// The `moerl` binary as users and the rendered manifests run it (MOERL_BIN, set by ctest):
// `moerl trainer` under a multi-rank launcher refuses to start several independent
// trainers; `moerl env` never prints the Redis password.
#include <gtest/gtest.h>

#include <filesystem>

#include "base/deadline.h"
#include "base/env.h"
#include "base/subprocess.h"

namespace moerl::cli {
namespace {

std::string bin() { return env::get_or("MOERL_BIN", ""); }
std::string source_dir() { return env::get_or("MOERL_SOURCE_DIR", "."); }

CapturedRun run(const std::vector<std::string>& argv, std::vector<std::pair<std::string, std::string>> env) {
  SpawnOptions o;
  o.set_env = std::move(env);
  return run_captured(argv, Deadline::after_seconds(60), o);
}

// What a PyTorchJob with Worker replicas (or `moerl launch -n 2`) gives every rank: a trainer
// group of 2 ranks needs ep.size = 2; any other size is refused before anything starts.
TEST(TrainerCli, RanksThatDoNotMatchEpSizeAreRefusedBeforeAnythingStarts) {
  if (bin().empty() || !std::filesystem::exists(bin())) GTEST_SKIP() << "MOERL_BIN not built (run through ctest)";
  const std::string app = source_dir() + "/examples/deploy/small/app.toml";
  const std::string run_dir = std::filesystem::temp_directory_path() / ("moerl-cli-trainer-" + std::to_string(::getpid()));
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"ep.size=1", "trainer: WORLD_SIZE=2 but ep.size=1: every rank would run the whole trainer on its own"},
      {"ep.size=4", "trainer: ep.size=4 needs 4 ranks but WORLD_SIZE=2"}};
  for (const auto& [ep, message] : cases) {
    SCOPED_TRACE(ep);
    CapturedRun r = run({bin(), "trainer", app, "--set", ep, "--run-dir", run_dir},
                        {{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29999"}});
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("HINT"), std::string::npos) << r.output;
    EXPECT_FALSE(std::filesystem::exists(run_dir)) << "it wrote to the run dir before refusing";
  }
}

TEST(EnvCli, TheRedisPasswordIsReportedAsSetNeverPrinted) {
  if (bin().empty() || !std::filesystem::exists(bin())) GTEST_SKIP() << "MOERL_BIN not built (run through ctest)";
  CapturedRun r = run({bin(), "env"}, {{"MOERL_REDIS_PASSWORD", "s3cret-pw"}});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("MOERL_REDIS_PASSWORD"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("s3cret-pw"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace moerl::cli
