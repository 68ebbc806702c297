// The tiny job every end-to-end test starts from: a 1-layer Qwen3-MoE (hidden 32, 4 experts
// top-2) learning 1-digit addition with partial credit for well-formed answers, 40 SFT steps
// and 6 GRPO steps of 4 prompt groups of 4. It runs in well under a second on one core. A
// test states only what it changes, as `--set`-style overrides ("train.steps=3",
// "runtime.mode=\"async\""), so the preset is written once.
//
//   job::JobConfig cfg = e2e::tiny_job({"algorithm.algorithm=\"ppo\""});
//   std::string path = e2e::write_tiny_job(dir, {"runtime.mode=\"async\""});  // for a subprocess
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/config.h"
#include "job/job_config.h"

namespace moerl::e2e {

inline constexpr const char* kTinyJobToml = R"([model]
init = "random"
hidden_size = 32
num_hidden_layers = 1
num_attention_heads = 2
num_key_value_heads = 1
num_experts = 4
num_experts_per_tok = 2
moe_intermediate_size = 32
max_position_embeddings = 32
seed = 3
[task]
name = "addition"
digits = 1
seed = 5
format_reward = 0.2
[algorithm]
algorithm = "grpo"
group_size = 4
eps_high = 0.28
[rollout]
prompts_per_step = 4
max_new_tokens = 3
[train]
sft_steps = 40
sft_batch_size = 16
steps = 6
lr = 1e-3
warmup_steps = 2
micro_batch_size = 8
eval_prompts = 16
keep_checkpoints = 4
seed = 11
threads = 1
)";

// The async variant the queue tests start from: 2-digit sums with no format credit, no SFT,
// TIS behaviour correction, 4 RL steps, one worker, the library defaults elsewhere (a test
// appends its own [runtime] table).
inline const std::vector<std::string> kAsyncTiny = {
    "model.max_position_embeddings=64", "task.digits=2", "task.seed=1", "task.format_reward=0.0",
    "algorithm.eps_high=0.2", "algorithm.behaviour_correction=\"tis\"", "rollout.max_new_tokens=4",
    "rollout.num_workers=1", "train.sft_steps=0", "train.sft_batch_size=64", "train.steps=4",
    "train.warmup_steps=0", "train.micro_batch_size=64", "train.keep_checkpoints=2", "train.seed=1",
    "train.threads=0"};

// `base` followed by `more` (later overrides win).
inline std::vector<std::string> plus(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

// The preset with `overrides` applied, as TOML text (what a run dir's config.toml holds).
inline std::string tiny_job_text(const std::vector<std::string>& overrides = {}) {
  return ConfigDoc::parse(kTinyJobToml, "tiny_job.toml", overrides).to_toml();
}

inline job::JobConfig tiny_job(const std::vector<std::string>& overrides = {}) {
  return job::JobConfig::parse(ConfigDoc::parse(kTinyJobToml, "tiny_job.toml", overrides));
}

// Writes the preset with overrides to DIR/job.toml (created) and returns the path.
inline std::string write_tiny_job(const std::string& dir, const std::vector<std::string>& overrides = {}) {
  std::filesystem::create_directories(dir);
  const std::string path = (std::filesystem::path(dir) / "job.toml").string();
  std::ofstream(path) << tiny_job_text(overrides);
  return path;
}

}  // namespace moerl::e2e
