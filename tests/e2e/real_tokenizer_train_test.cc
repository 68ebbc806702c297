// A real Hugging Face tokenizer end to end, the way a user brings a Hub checkpoint: `moerl
// init` writes a small random-weight Qwen3-MoE whose vocabulary (151936) matches the real
// Qwen3 tokenizer, and `moerl train` runs the shipped example config (examples/gsm8k-qwen3.toml)
// on a chat-format math JSONL file: SFT warm start, GRPO, checkpoints, eval. `moerl task` on
// the same config shows the prompts rendered by Qwen3's chat template and scores answers
// with the math verifier.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "e2e/async_test_util.h"
#include "e2e/real_vocab_model.h"

namespace moerl {
namespace {

namespace fs = std::filesystem;

class RealTokenizerTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    if (e2e::moerl_binary().empty()) GTEST_SKIP() << "MOERL_BIN is not set (run through ctest)";
    dir_ = train::testing::make_temp_dir("real-tok");
  }
  void TearDown() override {
    if (!dir_.empty()) remove_tree(dir_);
  }

  // Chat-form lines whose answers are all 12 (so one scored text fits every item).
  std::string write_dataset() {
    const std::string path = dir_ + "/sums.jsonl";
    std::ofstream f(path);
    for (int a = 0; a <= 12; ++a) {
      const nlohmann::json line = {
          {"messages", {{{"role", "user"}, {"content", "What is " + std::to_string(a) + " + " + std::to_string(12 - a) + "?"}}}},
          {"answer", a % 2 ? nlohmann::json(12) : nlohmann::json("\\boxed{12}")}};
      f << line.dump() << "\n";
    }
    return path;
  }

  std::string dir_;
};

TEST_F(RealTokenizerTrain, AHubStyleCheckpointTrainsOnChatMathWithTheExampleConfig) {
  const std::string model = e2e::real_vocab_model(dir_, 256);
  ASSERT_FALSE(HasFailure());
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}) {
    EXPECT_TRUE(fs::exists(fs::path(model) / f)) << f << " missing from the init output";
  }
  const nlohmann::json written = nlohmann::json::parse(train::testing::read_text(model + "/config.json"));
  EXPECT_EQ(written.at("vocab_size"), 151936);
  EXPECT_EQ(written.at("eos_token_id"), 151645);  // <|im_end|>, from the tokenizer

  const std::string example = e2e::source_dir() + "/examples/gsm8k-qwen3.toml";
  const std::vector<std::string> sets = {
      "--set", "model.init=\"" + model + "\"", "--set", "model.device=\"cpu\"", "--set", "model.dtype=\"float32\"",
      "--set", "task.file=\"" + write_dataset() + "\"", "--set", "task.held_out_fraction=0.3"};

  // What the policy reads: Qwen3's template with the example's system prompt, ending in the
  // generation prompt; the math verifier scores a boxed 12 as right against both answer forms.
  std::vector<std::string> task_args = {"task", example, "--count", "3", "--score", "so the sum is \\boxed{12}."};
  task_args.insert(task_args.end(), sets.begin(), sets.end());
  CapturedRun task = e2e::run_moerl(task_args);
  ASSERT_EQ(task.status, 0) << task.output;
  int items = 0;
  std::istringstream lines(task.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    const nlohmann::json it = nlohmann::json::parse(line);
    const std::string prompt = it.at("prompt");
    EXPECT_EQ(prompt.rfind("<|im_start|>system\nSolve the problem step by step.", 0), 0u) << prompt;
    EXPECT_NE(prompt.find("<|im_end|>\n<|im_start|>user\nWhat is "), std::string::npos) << prompt;
    EXPECT_EQ(prompt.substr(prompt.size() - 22), "<|im_start|>assistant\n") << prompt;
    EXPECT_EQ(it.at("reward"), 1.0) << line;
    ++items;
  }
  EXPECT_EQ(items, 3) << task.output;
  task_args[5] = "12";  // a bare number has no final-answer marker: the math verifier gives 0
  CapturedRun bare = e2e::run_moerl(task_args);
  ASSERT_EQ(bare.status, 0) << bare.output;
  EXPECT_NE(bare.output.find("\"reward\":0.0"), std::string::npos) << bare.output;

  // The example's own run, shrunk to CI size: SFT warm start, 3 GRPO steps, checkpoints, eval.
  const std::string run = dir_ + "/run";
  std::vector<std::string> train_args = {"train", example, "--run-dir", run, "--fresh", "--no-plot"};
  train_args.insert(train_args.end(), sets.begin(), sets.end());
  for (const char* s : {"train.sft_steps=12", "train.sft_batch_size=4", "train.sft_lr=1e-3", "train.steps=3",
                        "train.lr=1e-4", "train.warmup_steps=0", "train.micro_batch_size=8", "train.eval_prompts=4",
                        "train.eval_every=0", "train.checkpoint_every=2", "train.threads=1",
                        "rollout.prompts_per_step=2", "rollout.max_new_tokens=12", "algorithm.group_size=4"}) {
    train_args.push_back("--set");
    train_args.push_back(s);
  }
  CapturedRun trained = e2e::run_moerl(train_args, 600);
  ASSERT_EQ(trained.status, 0) << trained.output.substr(trained.output.size() > 6000 ? trained.output.size() - 6000 : 0);
  const nlohmann::json summary = nlohmann::json::parse(train::testing::read_text(run + "/summary.json"));
  EXPECT_EQ(summary.at("steps").at("sft"), 12);
  EXPECT_EQ(summary.at("steps").at("rl"), 3);
  EXPECT_EQ(summary.at("eval").at("num_prompts"), 4);
  EXPECT_TRUE(summary.at("eval").at("final").is_number());
  EXPECT_GE(summary.at("parameters").get<int64_t>(), 151936 * 32);
  EXPECT_TRUE(fs::exists(run + "/store/ckpt")) << "no checkpoint was written";
  EXPECT_NE(trained.output.find("rendered through the chat template"), std::string::npos)
      << "the run did not use the chat template";
}

}  // namespace
}  // namespace moerl
