// `moerl bench train` as users run it: a tiny config.json geometry with random weights trains
// on a synthetic GRPO batch and reports one JSON object whose figures agree with each other;
// --set takes the job config's [train] keys and names a key it does not know.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/deadline.h"
#include "base/env.h"
#include "base/subprocess.h"

namespace moerl::cli {
namespace {

std::string bin() { return env::get_or("MOERL_BIN", ""); }
std::string fixture(const std::string& name) {
  return env::get_or("MOERL_SOURCE_DIR", ".") + "/tests/fixtures/" + name + "/config.json";
}

CapturedRun bench_train(std::vector<std::string> flags) {
  std::vector<std::string> argv = {bin(), "bench", "train"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return run_captured(argv, Deadline::after_seconds(120), {});
}

TEST(BenchTrainCli, ReportsAStepWithConsistentFigures) {
  if (bin().empty() || !std::filesystem::exists(bin())) GTEST_SKIP() << "MOERL_BIN not built (run through ctest)";
  CapturedRun r = bench_train({"--config", fixture("qwen3_moe_untied"), "--layers", "2", "--sequences", "32", "--prompt",
                               "8", "--response", "24", "--device", "cpu", "--steps", "3", "--set",
                               "train.micro_batch_size=8", "--set", "train.logprob_chunk=16"});
  ASSERT_EQ(r.status, 0) << r.output;
  nlohmann::json j = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  EXPECT_EQ(j.at("layers").get<int64_t>(), 2);
  EXPECT_EQ(j.at("dtype").get<std::string>(), "float32");
  EXPECT_EQ(j.at("tokens_per_step").get<double>(), 32.0 * (8 + 24));
  EXPECT_EQ(j.at("response_tokens_per_step").get<double>(), 32.0 * 24);
  EXPECT_EQ(j.at("steps_measured").get<int64_t>(), 2);
  for (const char* key : {"step_seconds", "tokens_per_s", "response_tokens_per_s", "active_parameters",
                          "total_parameters", "flops_per_step", "matmul_tflops", "mfu", "peak_memory_GB"}) {
    EXPECT_GT(j.at(key).get<double>(), 0) << key;
  }
  const double s = j.at("step_seconds").get<double>();
  EXPECT_NEAR(j.at("tokens_per_s").get<double>(), j.at("tokens_per_step").get<double>() / s, 1e-6 / s);
  EXPECT_LE(j.at("mfu").get<double>(), 1.0);
  // Layer 0 dense, layer 1 MoE (mlp_only_layers [0]); H=48, 4 heads + 1 KV head of 16, dense
  // width 40, 2 of 8 experts of width 24, vocab 100, untied: the embedding table is not counted.
  const double attention = 48 * 64 + 2 * 48 * 16 + 64 * 48 + 2 * 16 + 2 * 48;
  const double dense = 3 * 48 * 40, moe = 8 * 48 + 2 * 3 * 48 * 24;
  EXPECT_DOUBLE_EQ(j.at("active_parameters").get<double>(), 2 * attention + dense + moe + 48 + 100 * 48);
  EXPECT_LT(j.at("active_parameters").get<double>(), j.at("total_parameters").get<double>());
  EXPECT_DOUBLE_EQ(j.at("flops_per_step").get<double>(),
                   6 * j.at("active_parameters").get<double>() * j.at("tokens_per_step").get<double>());
  EXPECT_EQ(j.at("trainer").at("micro_batch_size").get<int64_t>(), 8);
  EXPECT_EQ(j.at("trainer").at("logprob_chunk").get<int64_t>(), 16);
  EXPECT_EQ(j.at("train_set").at("logprob_chunk").get<std::string>(), "16");
  EXPECT_EQ(j.at("optimizer_steps").get<int64_t>(), 1);
}

// --profile: with Kineto, one more step's trace is written and its kernels summed (none on the
// CPU); without it (Debian's libtorch) a clear error names the flag and the missing part.
TEST(BenchTrainCli, ProfileWritesATraceOrSaysWhyNot) {
  if (bin().empty() || !std::filesystem::exists(bin())) GTEST_SKIP() << "MOERL_BIN not built (run through ctest)";
  const std::string trace = ::testing::TempDir() + "/bench-train-profile.json";
  std::filesystem::remove(trace);
  CapturedRun r = bench_train({"--config", fixture("qwen3_moe_untied"), "--layers", "1", "--sequences", "16", "--prompt",
                               "4", "--response", "4", "--steps", "2", "--profile", trace});
  if (r.status != 0) {
    EXPECT_NE(r.output.find("--profile " + trace + ": this libtorch was built without Kineto"), std::string::npos)
        << r.output;
    return;
  }
  nlohmann::json j = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  EXPECT_EQ(j.at("profile").at("trace").get<std::string>(), trace);
  EXPECT_GT(j.at("profile").at("wall_ms").get<double>(), 0);
  EXPECT_TRUE(std::filesystem::exists(trace));
}

TEST(BenchTrainCli, BadFlagsNameTheFlag) {
  if (bin().empty() || !std::filesystem::exists(bin())) GTEST_SKIP() << "MOERL_BIN not built (run through ctest)";
  // Every case fails before a model is built.
  const std::vector<std::string> tiny = {"--config", fixture("qwen3_moe_tied"), "--prompt", "4", "--response", "4"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> f = tiny;
    f.insert(f.end(), extra.begin(), extra.end());
    return bench_train(f);
  };
  struct Case {
    std::vector<std::string> flags;
    std::string expect;
  };
  for (const Case& c : {Case{{"--set", "train.no_such_key=3"}, "no_such_key"},
                        Case{{"--set", "train.micro_batch_size=0"}, "train.micro_batch_size"},
                        Case{{"--set", "model.hidden_size=8"}, "--set model.hidden_size=8 is not of the form train.KEY=VALUE"},
                        Case{{"--sequences", "24"}, "--sequences 24 is not a positive multiple"},
                        Case{{"--steps", "1"}, "--steps 1 leaves no measured step"},
                        Case{{"--layers", "9"}, "layers <= num_hidden_layers (3)"},
                        Case{{"--device", "tpu"}, "--device tpu is not a device"}}) {
    SCOPED_TRACE(c.expect);
    CapturedRun r = with(c.flags);
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace moerl::cli
