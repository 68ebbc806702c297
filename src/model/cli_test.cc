// The `moerl forward` / `moerl generate` contract, run as a subprocess (MOERL_BIN): outputs
// against the fixtures, and bad inputs fail with a clear message and a non-zero exit.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "base/files.h"
#include "base/subprocess.h"
#include "io/tensor_io.h"
#include "model/test_util.h"

namespace moerl::model {
namespace {

namespace fs = std::filesystem;
using testing::fixture_dir;

struct RunResult {
  int code = -1;
  std::string output;  // stdout + stderr
};

RunResult run_moerl(const std::string& args) {
  const char* bin = std::getenv("MOERL_BIN");
  RunResult r;
  if (bin == nullptr) {
    r.output = "MOERL_BIN is not set";
    return r;
  }
  CapturedRun c = run_captured({"/bin/sh", "-c", std::string(bin) + " " + args}, Deadline::after_seconds(300));
  r.code = c.status;
  r.output = c.timed_out ? c.output + "\n(killed: still running after 300 s)" : c.output;
  return r;
}

std::string tmp(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/cli";
  fs::create_directories(dir);
  return dir + "/" + name;
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv("MOERL_BIN") == nullptr) GTEST_SKIP() << "MOERL_BIN not set (run through ctest)";
  }
};

TEST_F(Cli, ForwardWritesFixtureLogits) {
  const std::string dir = fixture_dir("qwen3_moe_tied");
  const std::string out = tmp("logits.safetensors");
  RunResult r = run_moerl("forward --model " + dir + " --input " + dir + "/inputs.safetensors --output " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  auto got = io::load_tensors(out);
  auto ref = io::load_tensors(dir + "/reference.safetensors");
  EXPECT_EQ(got.at("logits").scalar_type(), at::kFloat);
  EXPECT_LE(testing::max_abs_diff(got.at("logits"), ref.at("logits")), testing::kLogitTol);
}

TEST_F(Cli, GenerateGreedyWritesPromptThenContinuation) {
  const std::string dir = fixture_dir("mixtral");
  const std::string out = tmp("gen.safetensors");
  RunResult r = run_moerl("generate --model " + dir + " --input " + dir +
                    "/inputs.safetensors --max-new-tokens 8 --greedy --ignore-eos --output " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  auto got = io::load_tensors(out).at("output_ids");
  auto ref = io::load_tensors(dir + "/reference.safetensors").at("greedy_ids");
  Model m = load_model(dir);
  testing::expect_greedy_matches(m, got, ref, io::load_tensors(dir + "/inputs.safetensors").at("input_ids").size(1),
                                 "moerl generate --greedy");
}

TEST_F(Cli, GenerateSampledIsSeeded) {
  const std::string dir = fixture_dir("qwen3_moe_untied");
  std::string common = "generate --model " + dir + " --input " + dir +
                       "/inputs.safetensors --max-new-tokens 6 --temperature 0.9 --top-p 0.95 --top-k 20 ";
  ASSERT_EQ(run_moerl(common + "--seed 4 --output " + tmp("s1.safetensors")).code, 0);
  ASSERT_EQ(run_moerl(common + "--seed 4 --output " + tmp("s2.safetensors")).code, 0);
  auto a = io::load_tensors(tmp("s1.safetensors")).at("output_ids");
  auto b = io::load_tensors(tmp("s2.safetensors")).at("output_ids");
  EXPECT_EQ(a.sizes(), at::IntArrayRef({3, 16}));
  EXPECT_TRUE(at::equal(a, b));
}

// `moerl convert` re-saves transformers 5's fused in-memory layout as the per-expert hub
// layout that save_pretrained writes, with the same tensors, and the result still computes
// transformers' logits (deepseek_v3: the selection bias travels too).
TEST_F(Cli, ConvertWritesTheHubLayout) {
  const std::string src = fixture_dir("deepseek_v3_qlora"), in = tmp("fused_in"), out = tmp("converted");
  remove_tree(in);
  remove_tree(out);
  fs::create_directories(in);
  fs::copy_file(src + "/config.json", in + "/config.json");
  fs::copy_file(src + "/fused.safetensors", in + "/model.safetensors");
  RunResult r = run_moerl("convert --model " + in + " --output " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  auto hub = io::load_tensors(src + "/model.safetensors"), got = io::load_tensors(out);
  ASSERT_EQ(got.size(), hub.size());
  for (const auto& [name, t] : hub) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_TRUE(at::equal(got.at(name), t)) << name;
  }
  r = run_moerl("forward --model " + out + " --input " + src + "/inputs.safetensors --output " + tmp("cl.safetensors"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_LE(testing::max_abs_diff(io::load_tensors(tmp("cl.safetensors")).at("logits"),
                                  io::load_tensors(src + "/reference.safetensors").at("logits")),
            testing::kLogitTol);
}

// Copies a fixture model dir so a test can break it.
std::string copy_fixture(const std::string& name, const std::string& as) {
  const std::string dst = tmp(as);
  remove_tree(dst);
  fs::create_directories(dst);
  for (const char* f : {"config.json", "model.safetensors"}) {
    fs::copy_file(fixture_dir(name) + "/" + f, dst + "/" + f);
  }
  return dst;
}

void expect_clean_failure(const RunResult& r, const std::string& needle) {
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_LT(r.code, 128) << "crashed: " << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << "message lacks '" << needle << "': " << r.output;
}

// --dtype bfloat16 runs the model in bf16 (logits still written as float32, near transformers'
// float32 ones but not equal to them); bad --device/--dtype values and a GPU device without
// a GPU fail naming the flag.
TEST_F(Cli, DeviceAndDtypeFlags) {
  const std::string dir = fixture_dir("qwen3_moe_tied");
  const std::string in = dir + "/inputs.safetensors";
  RunResult r = run_moerl("forward --model " + dir + " --input " + in + " --device cpu --dtype bfloat16 --output " +
                          tmp("bf16.safetensors"));
  ASSERT_EQ(r.code, 0) << r.output;
  at::Tensor got = io::load_tensors(tmp("bf16.safetensors")).at("logits");
  at::Tensor ref = io::load_tensors(dir + "/reference.safetensors").at("logits");
  EXPECT_EQ(got.scalar_type(), at::kFloat);
  const double err = testing::max_abs_diff(got, ref), scale = ref.abs().max().item<double>();
  EXPECT_GT(err, testing::kLogitTol) << "--dtype bfloat16 did not change the model's dtype";
  EXPECT_LT(err, 0.05 * scale) << "bf16 logits far from float32 ones";

  r = run_moerl("generate --model " + dir + " --input " + in + " --max-new-tokens 4 --greedy --dtype bf16 --output " +
                tmp("bf16_gen.safetensors"));
  ASSERT_EQ(r.code, 0) << r.output;
  at::Tensor ids = io::load_tensors(in).at("input_ids");
  EXPECT_EQ(io::load_tensors(tmp("bf16_gen.safetensors")).at("output_ids").size(1), ids.size(1) + 4);

  const std::string fwd = "forward --model " + dir + " --input " + in + " --output " + tmp("never.safetensors");
  expect_clean_failure(run_moerl(fwd + " --device tpu"), "--device tpu");
  expect_clean_failure(run_moerl(fwd + " --dtype float16"), "--dtype");
  if (!at::hasCUDA()) expect_clean_failure(run_moerl(fwd + " --device cuda"), "sees no CUDA GPU");
}

TEST_F(Cli, BadInputsFailCleanly) {
  const std::string in = fixture_dir("qwen3_moe_tied") + "/inputs.safetensors";
  const std::string out = tmp("never.safetensors");
  auto fwd = [&](const std::string& model, const std::string& input) {
    return run_moerl("forward --model " + model + " --input " + input + " --output " + out);
  };

  // Missing tensor: drop one expert from the checkpoint.
  {
    std::string d = copy_fixture("qwen3_moe_tied", "missing");
    auto t = io::load_tensors(d);
    t.erase("model.layers.0.mlp.experts.3.up_proj.weight");
    io::save_tensors(d, t);
    expect_clean_failure(fwd(d, in), "model.layers.0.mlp.experts.3.up_proj.weight");
  }
  // Wrong shape.
  {
    std::string d = copy_fixture("qwen3_moe_tied", "shape");
    auto t = io::load_tensors(d);
    t["model.norm.weight"] = at::ones({47});
    io::save_tensors(d, t);
    expect_clean_failure(fwd(d, in), "model.norm.weight");
  }
  // Unknown architecture.
  {
    std::string d = copy_fixture("qwen3_moe_tied", "arch");
    std::ifstream f(d + "/config.json");
    std::string cfg((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    cfg.replace(cfg.find("\"qwen3_moe\""), 11, "\"deepseek_v9\"");
    std::ofstream(d + "/config.json") << cfg;
    expect_clean_failure(fwd(d, in), "deepseek_v9");
  }
  // Truncated safetensors.
  {
    std::string d = copy_fixture("qwen3_moe_tied", "trunc");
    fs::resize_file(d + "/model.safetensors", fs::file_size(d + "/model.safetensors") / 2);
    expect_clean_failure(fwd(d, in), "model.safetensors");
  }
  // Input file without input_ids; ids out of the vocabulary; missing flags.
  {
    const std::string bad_in = tmp("bad_in.safetensors");
    io::save_tensors(bad_in, {{"tokens", at::zeros({1, 2}, at::kLong)}});
    expect_clean_failure(fwd(fixture_dir("mixtral"), bad_in), "input_ids");
    io::save_tensors(bad_in, {{"input_ids", at::full({1, 2}, 1000, at::kLong)}});
    expect_clean_failure(fwd(fixture_dir("mixtral"), bad_in), "vocabulary");
    expect_clean_failure(run_moerl("forward --model " + fixture_dir("mixtral")), "--input");
    expect_clean_failure(run_moerl("generate --model " + fixture_dir("mixtral") + " --input " + in +
                                   " --max-new-tokens 2 --output " + out),
                         "--greedy");
  }
}

}  // namespace
}  // namespace moerl::model
