// Expert-parallel training (2 ranks under `moerl launch`, loopback only): a PolicyTrainer
// step on 2 EP ranks equals the single-rank step (identical records; distinct records vs
// one step on both); `moerl train` with ep.size=2 commits a checkpoint one rank loads (same
// logits as the 2 ranks compute together) and resumes from it; `moerl generate --ep-size 2`
// matches one rank; ep.size=2 without a launcher is a clear error.
// Children are this test binary re-run per rank with MOERL_EP_TRAIN_CHILD=<scenario>.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/env.h"
#include "base/files.h"
#include "base/subprocess.h"
#include "io/tensor_io.h"
#include "model/expert_names.h"
#include "model/model.h"
#include "model/test_util.h"
#include "e2e/tiny_job.h"
#include "store/commit.h"
#include "store/object_store.h"
#include "model/tokenizer.h"
#include "train/dp_sync.h"
#include "train/ep_checkpoint.h"
#include "train/policy_trainer.h"

namespace moerl::train {
namespace {

namespace fs = std::filesystem;

// `cmd` through the shell, stdout and stderr together; killed after 180 s.
std::string run(const std::string& cmd, int* status) {
  CapturedRun r = run_captured({"/bin/sh", "-c", cmd}, Deadline::after_seconds(180));
  *status = r.status;
  return r.output;
}

std::string self_exe() {
  std::array<char, 4096> buf{};
  ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  return n > 0 ? std::string(buf.data(), n) : std::string();
}

const char* child_scenario() { return std::getenv("MOERL_EP_TRAIN_CHILD"); }

// Runs scenario `name` as 2 ranks of this binary under `moerl launch`.
std::string launch_children(const std::string& name, const std::string& env, int* status) {
  const char* bin = std::getenv("MOERL_BIN");
  return run("MOERL_EP_TRAIN_CHILD=" + name + " " + env + " timeout 120 " + bin + " launch -n 2 -- " + self_exe() +
                 " --gtest_filter=EpTrainChild.Run",
             status);
}

std::shared_ptr<ep::Group> child_group(const io::HfConfig& cfg, int64_t max_tokens) {
  ep::Config ec;
  ec.backend = ep::Backend::kFabric;
  ec.hidden = cfg.hidden_size;
  ec.max_topk = cfg.num_experts_per_tok;
  ec.max_tokens_per_rank = max_tokens;
  ec.timeout_s = 60;
  return ep::make_group(ec, cfg.num_experts);
}

// Two prompt groups of 4 with random tokens and rewards; the lengths do not depend on seed
// (`extra` adds that many response tokens to every sample).
std::vector<runtime::ExperienceRecord> records(int64_t vocab, uint64_t seed = 17, int extra = 0) {
  at::manual_seed(seed);
  std::vector<runtime::ExperienceRecord> out;
  for (int g = 0; g < 2; ++g) {
    runtime::ExperienceRecord r;
    r.task_id = "t" + std::to_string(g);
    at::Tensor prompt = at::randint(3, vocab, {3 + g}, at::kLong);
    for (int k = 0; k < 4; ++k) {
      runtime::Sample s;
      for (int64_t i = 0; i < prompt.numel(); ++i) s.prompt_tokens.push_back(static_cast<int32_t>(prompt[i].item<int64_t>()));
      at::Tensor resp = at::randint(3, vocab, {2 + k % 3 + extra}, at::kLong);
      for (int64_t i = 0; i < resp.numel(); ++i) s.response_tokens.push_back(static_cast<int32_t>(resp[i].item<int64_t>()));
      s.behaviour_logprobs.assign(s.response_tokens.size(), 0.f);
      s.reward = at::rand({1}).item<float>();
      r.samples.push_back(s);
    }
    out.push_back(r);
  }
  return out;
}

TrainerConfig trainer_config() {
  TrainerConfig c;
  c.adamw.lr = 1e-2;
  c.adamw.weight_decay = 0.01;
  // NOTE: with eps 1e-8, float32 noise in ~1e-8 gradients moved k_proj 4e-5 on an AMD EPYC.
  c.adamw.eps = 1e-6;
  c.schedule = {.lr = 1e-2, .kind = LrSchedule::Kind::kConstant};
  c.max_grad_norm = 0.05;  // small, so clipping by the global norm is exercised
  c.micro_batch_size = 3;  // 8 rows: three micro-batches
  c.loss.group_size = 4;
  c.loss.aux_loss_coef = 0.01;
  return c;
}

void expect_same_params(const model::Model& ep_model, const model::Model& full, const model::Model& init) {
  int64_t experts = 0;
  for (const auto& [name, p] : ep_model.params()) {
    ASSERT_TRUE(full.params().count(name)) << name;
    EXPECT_LE(model::testing::max_abs_diff(p, full.params().at(name)), 1e-5) << name;
    EXPECT_FALSE(at::equal(p, init.params().at(name))) << name << " did not move";
    experts += model::is_routed_expert(name) ? 1 : 0;
  }
  EXPECT_GT(experts, 0);
}

// (a) Each rank: an EP=2 trainer and a single-rank trainer on the same records, two RL steps
// and one SFT step; parameters must agree within 1e-5.
void child_step() {
  const io::HfConfig cfg = model::testing::tiny_qwen3();
  model::ModelOptions mo;
  mo.ep_group = child_group(cfg, 256);
  auto dp = DataParallel::join(60);
  model::Model ep_model = model::init_random(cfg, 9, mo);
  model::Model full = model::init_random(cfg, 9);
  PolicyTrainer ep_trainer(ep_model, nullptr, trainer_config(), 0);
  ep_trainer.set_data_parallel(dp);
  PolicyTrainer one(full, nullptr, trainer_config(), 0);
  const auto recs = records(cfg.vocab_size);
  for (int step = 0; step < 2; ++step) {
    StepStats a = ep_trainer.train_step(recs), b = one.train_step(recs);
    EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-5 * std::max(1.0, b.grad_norm)) << "step " << step;
    EXPECT_GT(b.grad_norm, trainer_config().max_grad_norm) << "clipping not exercised";
    EXPECT_NEAR(a.loss, b.loss, 1e-5);
  }
  std::vector<runtime::Sample> sft;
  for (const auto& r : recs) sft.push_back(r.samples[0]);
  ep_trainer.sft_step(sft, 1e-2);
  one.sft_step(sft, 1e-2);
  expect_same_params(ep_model, full, model::init_random(cfg, 9));
}

// (a') Different records per rank (no router loss, which is not linear in the batch): the EP
// step equals one single-rank step on both ranks' records together. That holds only if dense
// gradients are averaged across ranks and, when the ranks hold different numbers of tokens
// (`unequal`), if token-mean divides by the global token count and GAE whitens with global
// statistics (`ppo`).
void child_distinct(bool unequal, bool ppo) {
  const io::HfConfig cfg = model::testing::tiny_qwen3();
  model::ModelOptions mo;
  mo.ep_group = child_group(cfg, 256);
  auto dp = DataParallel::join(60);
  TrainerConfig tc = trainer_config();
  tc.loss.aux_loss_coef = 0;
  if (ppo) {
    tc.loss.algorithm = rl::Algorithm::kPpo;
    tc.loss.adv_estimator = rl::AdvEstimator::kGae;
  }
  model::Model ep_model = model::init_random(cfg, 9, mo);
  model::Model full = model::init_random(cfg, 9);
  PolicyTrainer ep_trainer(ep_model, nullptr, tc, 0);
  ep_trainer.set_data_parallel(dp);
  PolicyTrainer one(full, nullptr, tc, 0);
  auto rank_records = [&](int r) { return records(cfg.vocab_size, 17 + r, unequal ? 3 * r : 0); };
  std::vector<runtime::ExperienceRecord> all;
  for (int r = 0; r < 2; ++r) {
    for (auto& rec : rank_records(r)) all.push_back(rec);
  }
  StepStats a = ep_trainer.train_step(rank_records(dp->rank())), b = one.train_step(all);
  EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-5 * std::max(1.0, b.grad_norm));
  expect_same_params(ep_model, full, model::init_random(cfg, 9));
}

// (a'') Another architecture (deepseek_v3: MLA, biased sigmoid group routing, shared expert,
// a dense first layer; qwen2_moe: gated shared expert, q/k/v biases): on 2 EP ranks the
// forward logits and two RL steps equal the single-rank ones; the buffers (the selection
// bias) stay untouched; the EP-sharded save reloads on one rank as the single-rank model.
void child_step_arch(const std::string& arch) {
  const io::HfConfig cfg = model::testing::tiny_config(arch);
  model::ModelOptions mo;
  mo.ep_group = child_group(cfg, 256);
  auto dp = DataParallel::join(60);
  model::Model ep_model = model::init_random(cfg, 9, mo);
  model::Model full = model::init_random(cfg, 9);
  {
    at::NoGradGuard g;
    for (model::Model* m : {&ep_model, &full}) {  // a selection bias that matters, same on both
      at::manual_seed(9);
      // NOTE: 0.01, the size of the router score spread at this init: routing stays varied.
      for (const auto& [name, b] : m->buffers()) b.copy_(at::randn(b.sizes()) * 0.01);
    }
    at::manual_seed(30 + dp->rank());
    at::Tensor ids = at::randint(3, cfg.vocab_size, {2, 7}, at::kLong);
    EXPECT_LE(model::testing::max_abs_diff(ep_model.forward({.input_ids = ids}).logits_BTV,
                                           full.forward({.input_ids = ids}).logits_BTV),
              1e-5)
        << "EP forward";
  }
  const model::Params buffers_before = full.state();
  PolicyTrainer ep_trainer(ep_model, nullptr, trainer_config(), 0);
  ep_trainer.set_data_parallel(dp);
  PolicyTrainer one(full, nullptr, trainer_config(), 0);
  const auto recs = records(cfg.vocab_size);
  for (int step = 0; step < 2; ++step) {
    StepStats a = ep_trainer.train_step(recs), b = one.train_step(recs);
    EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-5 * std::max(1.0, b.grad_norm)) << "step " << step;
    EXPECT_NEAR(a.loss, b.loss, 1e-5);
  }
  // As expect_same_params, but an expert no token was routed to may keep its values.
  const model::Model init = model::init_random(cfg, 9);
  int moved_experts = 0;
  for (const auto& [name, p] : ep_model.params()) {
    ASSERT_TRUE(full.params().count(name)) << name;
    EXPECT_LE(model::testing::max_abs_diff(p, full.params().at(name)), 1e-5) << name;
    const bool moved = !at::equal(p, init.params().at(name));
    if (model::is_routed_expert(name)) moved_experts += moved ? 1 : 0;
    else EXPECT_TRUE(moved) << name << " did not move";
  }
  EXPECT_GT(moved_experts, 0);
  for (const auto& [name, b] : ep_model.buffers()) {
    EXPECT_TRUE(at::equal(b, buffers_before.at(name))) << name << " is a buffer: not trained";
  }
  const fs::path dir = fs::path(::testing::TempDir()) / ("ep_arch_save_" + arch);
  if (dp->rank() == 0) remove_tree(dir.string());
  dp->barrier("clean " + dir.string());
  save_sharded_model(dir.string(), ep_model, model::CharTokenizer(), *dp);
  if (dp->rank() != 0) return;
  const model::Params back = model::load_model(dir.string()).state();
  ASSERT_EQ(back.size(), full.state().size());
  for (const auto& [name, t] : full.state()) EXPECT_LE(model::testing::max_abs_diff(back.at(name), t), 1e-5) << name;
}

// (b) Each rank loads MOERL_EP_MODEL_DIR with the EP group and writes the logits of its rows.
void child_logits() {
  const std::string dir = env::get("MOERL_EP_MODEL_DIR").value_or("");
  const io::HfConfig cfg = io::HfConfig::load(dir + "/config.json");
  model::ModelOptions mo;
  mo.ep_group = child_group(cfg, 64);
  model::Model m = model::load_model(dir, mo);
  const int rank = mo.ep_group->rank();
  at::manual_seed(100 + rank);
  at::Tensor ids = at::randint(3, cfg.vocab_size, {2, 6}, at::kLong);
  at::NoGradGuard g;
  at::Tensor logits = m.forward({.input_ids = ids}).logits_BTV;
  io::save_tensors(dir + "/../logits-" + std::to_string(rank) + ".safetensors", {{"ids", ids}, {"logits", logits}});
}

TEST(EpTrainChild, Run) {
  const char* s = child_scenario();
  if (!s) GTEST_SKIP() << "rank process of the EpTrain tests";
  if (std::string(s) == "step") child_step();
  else if (std::string(s) == "distinct") child_distinct(false, false);
  else if (std::string(s) == "unequal") child_distinct(true, false);
  else if (std::string(s) == "unequal_ppo") child_distinct(true, true);
  else if (std::string(s) == "logits") child_logits();
  else if (std::string(s).rfind("step_", 0) == 0) child_step_arch(std::string(s).substr(5));
  else FAIL() << "unknown scenario " << s;
}

TEST(EpTrain, TwoRankStepEqualsSingleRankStep) {
  if (child_scenario() || !std::getenv("MOERL_BIN")) GTEST_SKIP() << "needs MOERL_BIN (run through ctest)";
  int st = 0;
  std::string out = launch_children("step", "FI_PROVIDER=shm", &st);
  EXPECT_EQ(st, 0) << out;
  for (int r = 0; r < 2; ++r) {  // ran, not skipped
    EXPECT_NE(out.find("[rank " + std::to_string(r) + "] [       OK ] EpTrainChild.Run"), std::string::npos) << out;
  }
}

TEST(EpTrain, NewArchitecturesTwoRankForwardAndStepEqualSingleRank) {
  if (child_scenario() || !std::getenv("MOERL_BIN")) GTEST_SKIP() << "needs MOERL_BIN (run through ctest)";
  for (const char* arch : {"deepseek_v3", "qwen2_moe"}) {
    SCOPED_TRACE(arch);
    int st = 0;
    std::string out = launch_children(std::string("step_") + arch, "FI_PROVIDER=shm", &st);
    EXPECT_EQ(st, 0) << out;
    for (int r = 0; r < 2; ++r) {
      EXPECT_NE(out.find("[rank " + std::to_string(r) + "] [       OK ] EpTrainChild.Run"), std::string::npos) << out;
    }
  }
}

TEST(EpTrain, TwoRanksOnDistinctBatchesEqualOneStepOnBoth) {
  if (child_scenario() || !std::getenv("MOERL_BIN")) GTEST_SKIP() << "needs MOERL_BIN (run through ctest)";
  int st = 0;
  std::string out = launch_children("distinct", "FI_PROVIDER=shm", &st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_NE(out.find("[rank 1] [       OK ] EpTrainChild.Run"), std::string::npos) << out;
}

// Unequal token counts per rank: the loss normaliser (token-mean) and GAE whitening are the
// global batch's, so the EP step still equals one step on both ranks' records.
TEST(EpTrain, TwoRanksWithUnequalTokenCountsEqualOneStepOnBoth) {
  if (child_scenario() || !std::getenv("MOERL_BIN")) GTEST_SKIP() << "needs MOERL_BIN (run through ctest)";
  for (const char* scenario : {"unequal", "unequal_ppo"}) {
    SCOPED_TRACE(scenario);
    int st = 0;
    std::string out = launch_children(scenario, "FI_PROVIDER=shm", &st);
    EXPECT_EQ(st, 0) << out;
    EXPECT_NE(out.find("[rank 1] [       OK ] EpTrainChild.Run"), std::string::npos) << out;
  }
}

// The tiny-job preset (e2e/tiny_job.h) as 2 EP ranks: 3 SFT and 2 RL steps, a checkpoint
// after each, the library defaults for clipping, warm-up and retention.
std::string tiny_job_config(const fs::path& dir) {
  return e2e::write_tiny_job(
      dir.string(), {"model.seed=1", "task.seed=1", "task.format_reward=0.0", "algorithm.eps_high=0.2",
                     "rollout.max_new_tokens=4", "train.sft_steps=3", "train.sft_batch_size=8", "train.steps=2",
                     "train.eval_prompts=8", "train.checkpoint_every=1", "train.seed=1", "train.threads=1",
                     "train.micro_batch_size=8", "train.warmup_steps=0", "train.keep_checkpoints=2", "ep.size=2",
                     "ep.backend=\"fabric\""});
}

TEST(EpTrain, TrainCommitsCheckpointOneRankLoadsAndResumes) {
  if (child_scenario() || !std::getenv("MOERL_BIN")) GTEST_SKIP() << "needs MOERL_BIN (run through ctest)";
  const fs::path dir = fs::path(::testing::TempDir()) / "ep_train_job";
  remove_tree(dir);
  const std::string cfg = tiny_job_config(dir);
  const std::string run_dir = (dir / "run").string();
  const std::string bin = std::getenv("MOERL_BIN");
  const std::string train = "FI_PROVIDER=tcp FI_TCP_IFACE=lo timeout 200 " + bin + " launch -n 2 -- " + bin + " train " +
                            cfg + " --run-dir " + run_dir + " --no-plot";
  int st = 0;
  std::string out = run(train + " --stop-after-step 1", &st);
  ASSERT_EQ(st, 0) << out;
  ASSERT_FALSE(fs::exists(fs::path(run_dir) / "summary.json")) << "stopped early: no summary yet";

  // The committed checkpoint, read by one rank.
  auto store = store::open_store((fs::path(run_dir) / "store").string());
  auto reader = store::CommitReader::latest(*store, "ckpt");
  ASSERT_TRUE(reader.has_value());
  EXPECT_EQ(reader->manifest().extra.value("ep_size", 0), 2);
  EXPECT_EQ(reader->manifest().extra.value("rl_step", -1), 1);
  const fs::path model_dir = dir / "ckpt_model";
  fs::create_directories(model_dir);
  for (const std::string& name : reader->names()) {
    if (name.rfind("model/", 0) == 0) reader->get_file(name, (dir / "ckpt_model" / name.substr(6)).string());
  }
  model::Model one = model::load_model(model_dir.string());
  EXPECT_EQ(one.experts().count, one.config().num_experts);

  // The same checkpoint on 2 EP ranks: logits of each rank's rows equal the single rank's.
  out = launch_children("logits", "FI_PROVIDER=tcp FI_TCP_IFACE=lo MOERL_EP_MODEL_DIR=" + model_dir.string(), &st);
  ASSERT_EQ(st, 0) << out;
  ASSERT_NE(out.find("[rank 1] [       OK ] EpTrainChild.Run"), std::string::npos) << out;
  for (int r = 0; r < 2; ++r) {
    auto t = io::load_tensors((dir / ("logits-" + std::to_string(r) + ".safetensors")).string());
    at::NoGradGuard g;
    at::Tensor ref = one.forward({.input_ids = t.at("ids")}).logits_BTV;
    EXPECT_LE(model::testing::max_abs_diff(t.at("logits"), ref), 1e-5) << "rank " << r;
  }

  // Resume: the second run continues from RL step 1 to the end.
  out = run(train, &st);
  ASSERT_EQ(st, 0) << out;
  EXPECT_NE(out.find("loaded"), std::string::npos) << out;
  nlohmann::json summary = nlohmann::json::parse(std::ifstream(fs::path(run_dir) / "summary.json"));
  EXPECT_EQ(summary["steps"]["rl"], 2);
  EXPECT_EQ(summary["ep"]["size"], 2);
  int rl_rows = 0;
  std::ifstream metrics(fs::path(run_dir) / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) rl_rows += line.find("\"phase\":\"rl\"") != std::string::npos;
  EXPECT_EQ(rl_rows, 2) << "rank 0 alone writes metrics, one row per step";
  model::Model fin = model::load_model((fs::path(run_dir) / "final_model").string());
  EXPECT_EQ(fin.num_parameters(), one.num_parameters());

  // `moerl generate --ep-size 2` on the sharded final model = one rank's greedy output.
  at::manual_seed(3);
  io::save_tensors((dir / "in.safetensors").string(), {{"input_ids", at::randint(3, 20, {5, 4}, at::kLong)}});
  const std::string gen = bin + " generate --model " + run_dir + "/final_model --input " + (dir / "in.safetensors").string() +
                          " --max-new-tokens 6 --greedy --output ";
  out = run(gen + (dir / "one.safetensors").string(), &st);
  ASSERT_EQ(st, 0) << out;
  out = run("FI_PROVIDER=tcp FI_TCP_IFACE=lo timeout 60 " + bin + " launch -n 2 -- " + gen +
                (dir / "two.safetensors").string() + " --ep-size 2",
            &st);
  ASSERT_EQ(st, 0) << out;
  EXPECT_TRUE(at::equal(io::load_tensors((dir / "one.safetensors").string()).at("output_ids"),
                        io::load_tensors((dir / "two.safetensors").string()).at("output_ids")));
}

TEST(EpTrain, EpSizeWithoutLauncherIsAClearError) {
  if (child_scenario() || !std::getenv("MOERL_BIN")) GTEST_SKIP() << "needs MOERL_BIN (run through ctest)";
  const fs::path dir = fs::path(::testing::TempDir()) / "ep_train_nolaunch";
  remove_tree(dir);
  const std::string cfg = tiny_job_config(dir);
  int st = 0;
  std::string out = run("env -u WORLD_SIZE -u RANK " + std::string(std::getenv("MOERL_BIN")) + " train " + cfg +
                            " --run-dir " + (dir / "run").string(),
                        &st);
  EXPECT_EQ(st, 2) << out;
  EXPECT_NE(out.find("ep.size=2"), std::string::npos) << out;
  EXPECT_NE(out.find("WORLD_SIZE=1"), std::string::npos) << out;
  EXPECT_NE(out.find("moerl launch -n 2"), std::string::npos) << out;
}

}  // namespace
}  // namespace moerl::train
