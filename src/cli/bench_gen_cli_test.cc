// `moerl bench gen` as users run it: a config.json geometry with random weights, one JSON
// object whose figures come from the run; bad flags fail with the flag named; the shipped
// presets parse as the real checkpoints' config.json files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/deadline.h"
#include "base/env.h"
#include "base/subprocess.h"

namespace moerl::cli {
namespace {

std::string bin() { return env::get_or("MOERL_BIN", ""); }
std::string source_dir() { return env::get_or("MOERL_SOURCE_DIR", "."); }

CapturedRun bench_gen(std::vector<std::string> flags) {
  std::vector<std::string> argv = {bin(), "bench", "gen"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return run_captured(argv, Deadline::after_seconds(120), {});
}

TEST(BenchGenCli, ReportsEveryBatchWithItsRooflineFraction) {
  if (bin().empty() || !std::filesystem::exists(bin())) GTEST_SKIP() << "MOERL_BIN not built (run through ctest)";
  for (const char* fixture : {"deepseek_v3_qlora", "qwen2_moe"}) {
    SCOPED_TRACE(fixture);
    CapturedRun r = bench_gen({"--config", source_dir() + "/tests/fixtures/" + fixture + "/config.json", "--batch",
                               "2,5", "--prompt", "6", "--new-tokens", "4", "--device", "cpu"});
    ASSERT_EQ(r.status, 0) << r.output;
    nlohmann::json j = nlohmann::json::parse(r.output.substr(r.output.find('{')));
    EXPECT_GT(j.at("copy_GBps").get<double>(), 0.1);
    EXPECT_GT(j.at("weights_GB").get<double>(), 0);
    ASSERT_EQ(j.at("rows").size(), 2u);
    double last_bytes = 0;
    for (const auto& row : j.at("rows")) {
      EXPECT_GT(row.at("decode_ms_per_step").get<double>(), 0);
      EXPECT_NEAR(row.at("new_tokens_per_s").get<double>(),
                  row.at("batch").get<double>() * 1e3 / row.at("decode_ms_per_step").get<double>(), 1e-6);
      EXPECT_GT(row.at("roofline_fraction").get<double>(), 0);
      EXPECT_EQ(row.at("eager_fallbacks").get<int64_t>(), 0);  // the CPU path has no graph to fail
      // A larger batch touches more experts and holds more KV cache: more bytes per step.
      EXPECT_GT(row.at("GB_read_per_step").get<double>(), last_bytes);
      last_bytes = row.at("GB_read_per_step").get<double>();
    }
  }
}

TEST(BenchGenCli, BadFlagsNameTheFlag) {
  if (bin().empty() || !std::filesystem::exists(bin())) GTEST_SKIP() << "MOERL_BIN not built (run through ctest)";
  const std::string cfg = source_dir() + "/tests/fixtures/qwen2_moe/config.json";
  CapturedRun r = bench_gen({"--config", cfg, "--batch", "4,x"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--batch 4,x: 'x' is not a positive integer"), std::string::npos) << r.output;
  r = bench_gen({"--config", cfg + ".missing"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("config.json.missing"), std::string::npos) << r.output;
}

// --baseline runs a command with the run's geometry appended and sets its figures beside ours
// per batch; a command that fails or prints no JSON is an error naming it.
TEST(BenchGenCli, BaselineCommandGetsTheGeometryAndItsRowsAreCompared) {
  if (bin().empty() || !std::filesystem::exists(bin())) GTEST_SKIP() << "MOERL_BIN not built (run through ctest)";
  const std::string cfg = source_dir() + "/tests/fixtures/qwen2_moe/config.json";
  const auto script = std::filesystem::temp_directory_path() / ("moerl_fake_baseline_" + std::to_string(::getpid()));
  {
    std::ofstream f(script);
    f << "#!/bin/sh\necho 'a progress line'\n"
         "printf '{\"baseline\": \"fake %s\", \"rows\": [{\"batch\": 2, \"decode_ms_per_step\": 50, "
         "\"new_tokens_per_s\": 40}, {\"batch\": 5, \"error\": \"out of memory\"}]}\\n' \"$*\"\n";
  }
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  CapturedRun r = bench_gen({"--config", cfg, "--layers", "2", "--batch", "2,5", "--prompt", "6", "--new-tokens", "4",
                             "--baseline", script.string()});
  ASSERT_EQ(r.status, 0) << r.output;
  nlohmann::json j = nlohmann::json::parse(r.output.substr(r.output.find("\n{") + 1));
  EXPECT_NE(j.at("baseline").get<std::string>().find("--layers 2 --batch 2,5 --prompt 6 --new-tokens 4"),
            std::string::npos)
      << j.dump();
  const auto& rows = j.at("rows");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_NEAR(rows[0].at("speedup_vs_baseline").get<double>(), 50 / rows[0].at("decode_ms_per_step").get<double>(),
              1e-9);
  EXPECT_EQ(rows[0].at("baseline_new_tokens_per_s").get<double>(), 40);
  EXPECT_EQ(rows[1].at("baseline_error").get<std::string>(), "out of memory");
  EXPECT_FALSE(rows[1].contains("speedup_vs_baseline"));

  r = bench_gen({"--config", cfg, "--batch", "2", "--prompt", "6", "--new-tokens", "4", "--baseline", "false"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--baseline 'false' exited with status 1"), std::string::npos) << r.output;
  std::filesystem::remove(script);
}

// The presets are the real models' config.json keys: too big for this machine's memory, so
// only parsed (an out-of-range --layers reports the layer count the file declares).
TEST(BenchGenCli, PresetsParseWithTheirRealLayerCounts) {
  if (bin().empty() || !std::filesystem::exists(bin())) GTEST_SKIP() << "MOERL_BIN not built (run through ctest)";
  for (const auto& [preset, layers] : {std::pair{"qwen3-30b-a3b", 48}, std::pair{"deepseek-v3", 61}}) {
    SCOPED_TRACE(preset);
    CapturedRun r = bench_gen({"--config", source_dir() + "/examples/bench/" + preset + ".json", "--layers", "1000"});
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("layers <= num_hidden_layers (" + std::to_string(layers) + ")"), std::string::npos)
        << r.output;
  }
}

}  // namespace
}  // namespace moerl::cli

namespace moerl::cli {
namespace {

// A libtorch error (here an allocation of 512 TB, beyond any address space, so it fails at
// once whatever the kernel's overcommit policy) is one paragraph: libtorch's message without
// its C++ backtrace, which `moerl` used to print frame by frame.
TEST(BenchGenCli, ALibtorchErrorIsOneParagraphWithoutCppFrames) {
  if (bin().empty() || !std::filesystem::exists(bin())) GTEST_SKIP() << "MOERL_BIN not built (run through ctest)";
  CapturedRun r = bench_gen({"--config", source_dir() + "/tests/fixtures/qwen2_moe/config.json", "--batch",
                             "1000000000000", "--prompt", "64", "--new-tokens", "2", "--device", "cpu"});
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("moerl bench: error: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("allocate"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("frame #"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace moerl::cli
