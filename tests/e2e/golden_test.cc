// Golden run: a tiny job with a fixed seed must reproduce the committed loss curve
// (tests/golden/train_tiny.jsonl) within float rounding, and a run stopped mid-way and
// resumed from its checkpoint must reproduce the uninterrupted run of the same test bit for
// bit. MOERL_UPDATE_GOLDEN=1 rewrites the file after a deliberate change of the numerics
// (say so in the commit).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/files.h"
#include "base/jsonl.h"
#include "e2e/tiny_job.h"
#include "job/roles.h"

namespace moerl::train {
using namespace moerl::job;  // NOLINT: the job API under test
namespace {

namespace fs = std::filesystem;

// Losses are compared with the committed curve to a relative 1e-5 per value; phases, steps
// and rewards (means of verifiable rewards, summed exactly in double) must be equal.
// Why 1e-5: libtorch picks CPU kernels by machine (oneDNN / OpenBLAS by ISA and core type,
// ATen's vectorised kernels by AVX2 / AVX-512), so the same run rounds differently on
// another CPU. Measured on one AMD EPYC (AVX-512) by forcing the other kernels:
// OPENBLAS_CORETYPE = Haswell / Zen / Sandybridge / Nehalem / Prescott / SkylakeX /
// Cooperlake and ATEN_CPU_CAPABILITY = default / avx2 / avx512 gave 6 distinct curves, at
// most 5.8e-7 apart (relative, any row, any pair); no reward changed. One-line changes to the
// loss move it far more: entropy_coef 0 -> 1e-4 moves the RL losses by 2.8e-2,
// aux_loss_coef +1% the SFT losses by 4.7e-3 (RL by 0.84), sft_lr +0.1% by 3.3e-3. 1e-5 sits
// 17x above the rounding and 300x below the smallest of those.
constexpr double kLossRelTol = 1e-5;

void expect_matches_committed(const nlohmann::json& got, const nlohmann::json& want, size_t row) {
  EXPECT_EQ(got["phase"], want["phase"]) << "row " << row;
  EXPECT_EQ(got["step"], want["step"]) << "row " << row;
  EXPECT_EQ(got.contains("reward"), want.contains("reward")) << "row " << row;
  if (want.contains("reward")) {
    EXPECT_EQ(got["reward"], want["reward"]) << "row " << row << " reward";
  }
  const double a = got["loss"].get<double>(), b = want["loss"].get<double>();
  EXPECT_LE(std::abs(a - b), kLossRelTol * std::abs(b))
      << "row " << row << " (" << want["phase"] << " step " << want["step"] << "): loss " << a << " vs committed "
      << b << ", relative " << std::abs(a - b) / std::abs(b) << " > " << kLossRelTol
      << " is more than CPU rounding: the computation changed";
}

std::string source_dir() {
  const char* d = std::getenv("MOERL_SOURCE_DIR");
  return d ? d : ".";
}

// (phase, step, loss) rows of a run's metrics.jsonl, loss as written (full precision).
std::vector<nlohmann::json> curve(const fs::path& run_dir) {
  std::vector<nlohmann::json> out;
  for (const auto& row : metrics::read_jsonl((run_dir / "metrics.jsonl").string())) {
    nlohmann::json r = {{"phase", row["phase"]}, {"loss", row["loss"]}};
    r["step"] = row.contains("step") ? row["step"] : row["sft_step"];
    if (row.contains("reward")) r["reward"] = row["reward"];
    out.push_back(r);
  }
  return out;
}

nlohmann::json run(const fs::path& dir, int64_t stop_after) {
  JobConfig cfg = e2e::tiny_job();
  JobOptions o;
  o.run_dir = dir.string();
  o.plot = false;
  o.stop_after_rl_steps = stop_after;
  return run_job(cfg, o);
}

// A fresh temp run dir per test, removed when the test ends.
struct TempRun {
  fs::path dir;
  explicit TempRun(const std::string& tag)
      : dir(fs::temp_directory_path() / ("moerl-golden-" + tag + "-" + std::to_string(::getpid()))) {
    remove_tree(dir);
  }
  ~TempRun() { remove_tree(dir); }
  nlohmann::json run(const JobConfig& cfg) const {
    JobOptions o;
    o.run_dir = dir.string();
    o.plot = false;
    return run_job(cfg, o);
  }
  std::vector<nlohmann::json> rl_rows() const {
    std::vector<nlohmann::json> out;
    for (auto& row : metrics::read_jsonl((dir / "metrics.jsonl").string())) {
      if (row["phase"] == "rl") out.push_back(std::move(row));
    }
    return out;
  }
};

// An SFT-only job (train.steps = 0) commits one checkpoint and a final model; it used to
// commit the post-SFT state twice under one step name and fail on the second.
TEST(Golden, SftOnlyRunFinishes) {
  TempRun r("sft");
  JobConfig cfg = e2e::tiny_job();
  cfg.train.steps = 0;
  cfg.train.checkpoint_every = 10;
  nlohmann::json s = r.run(cfg);
  EXPECT_EQ(s["steps"]["rl"], 0);
  EXPECT_EQ(s["steps"]["sft"], 40);
  EXPECT_TRUE(fs::exists(r.dir / "final_model" / "config.json"));
}

// Dynamic sampling on the tiny job (1-digit sums, mostly solved after SFT, so many groups
// are all-correct): every step trains a full batch of groups that each have a reward spread,
// and the filtered groups are counted.
TEST(Golden, DynamicSamplingTrainsOnlyGroupsWithSignal) {
  TempRun r("dyn");
  JobConfig cfg = e2e::tiny_job();
  cfg.rollout.dynamic_sampling = true;
  cfg.rollout.max_sampling_rounds = 8;
  nlohmann::json s = r.run(cfg);
  const int64_t filtered = s["sampling"]["groups_filtered"].get<int64_t>();
  EXPECT_GT(filtered, 0);
  int64_t rows = 0, last_filtered = 0;
  for (const auto& row : r.rl_rows()) {
    ++rows;
    EXPECT_EQ(row["samples"].get<int64_t>(), 16) << row.dump();  // 4 groups x 4
    EXPECT_EQ(row["flat_groups"].get<int64_t>(), 0) << row.dump();
    EXPECT_GE(row["groups_filtered"].get<int64_t>(), last_filtered);
    last_filtered = row["groups_filtered"].get<int64_t>();
  }
  EXPECT_EQ(rows, 6);
  EXPECT_EQ(last_filtered, filtered);
}

// Dynamic sampling with an untrained policy and no format credit: no group ever has a
// spread, so each step spends its budget and trains one batch-sized round as drawn.
TEST(Golden, DynamicSamplingWithoutSignalTrainsABatchAsDrawn) {
  TempRun r("flat");
  JobConfig cfg = e2e::tiny_job({"task.format_reward=0.0", "train.sft_steps=0", "rollout.dynamic_sampling=true",
                                 "rollout.max_sampling_rounds=3"});
  nlohmann::json s = r.run(cfg);
  EXPECT_EQ(s["steps"]["rl"], 6);
  EXPECT_EQ(s["sampling"]["groups_filtered"], 6 * 4 * 3);  // every prompt of every budget
  const std::vector<nlohmann::json> rows = r.rl_rows();
  EXPECT_EQ(rows.size(), 6u);
  for (const auto& row : rows) {
    EXPECT_EQ(row["samples"].get<int64_t>(), 16) << row.dump();  // prompts_per_step x G, not the whole round
    EXPECT_EQ(row["flat_groups"].get<int64_t>(), 4) << row.dump();
  }
}

TEST(Golden, TinyRunReproducesCommittedCurveAndResumes) {
  fs::path base = fs::temp_directory_path() / ("moerl-golden-" + std::to_string(::getpid()));
  remove_tree(base);
  nlohmann::json summary = run(base / "full", 0);
  std::vector<nlohmann::json> full = curve(base / "full");
  ASSERT_EQ(full.size(), 46u);  // 40 SFT + 6 RL rows
  EXPECT_EQ(summary["steps"]["rl"], 6);

  fs::path golden = fs::path(source_dir()) / "tests/golden/train_tiny.jsonl";
  if (std::getenv("MOERL_UPDATE_GOLDEN")) {
    std::ofstream out(golden, std::ios::trunc);
    for (const auto& r : full) out << r.dump() << "\n";
  }
  std::vector<nlohmann::json> expected = metrics::read_jsonl(golden.string());
  ASSERT_EQ(expected.size(), full.size()) << golden;
  for (size_t i = 0; i < full.size(); ++i) expect_matches_committed(full[i], expected[i], i);

  // Stop after RL step 3 (checkpointed), then resume in the same dir: every row identical,
  // bit for bit, to the uninterrupted run above (same machine, same kernels).
  nlohmann::json stopped = run(base / "resumed", 3);
  EXPECT_EQ(stopped["stopped_at_rl_step"], 3);
  run(base / "resumed", 0);
  std::vector<nlohmann::json> resumed = curve(base / "resumed");
  ASSERT_EQ(resumed.size(), full.size());
  for (size_t i = 0; i < full.size(); ++i) EXPECT_EQ(resumed[i], full[i]) << "row " << i << " after resume";
  remove_tree(base);
}

}  // namespace
}  // namespace moerl::train
