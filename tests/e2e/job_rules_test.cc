// The rules the sync and the async job share since both run one trainer loop
// (job/trainer_loop.h) over an experience source: one metrics row and summary shape, one
// throughput definition, the PPO value head in the final model, an unreadable checkpoint as an
// error, --stop-after-step and resume, and a sync dynamic-sampling run that resumes on the
// curve of the uninterrupted run. Each used to hold for one mode only.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "base/error.h"
#include "base/files.h"
#include "base/jsonl.h"
#include "e2e/tiny_job.h"
#include "job/roles.h"
#include "store/commit.h"

namespace moerl::e2e {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kModes = {"sync", "async"};

// A fresh run dir, removed at the end.
struct RunDir {
  fs::path dir;
  explicit RunDir(const std::string& tag)
      : dir(fs::temp_directory_path() / ("moerl-rules-" + tag + "-" + std::to_string(::getpid()))) {
    remove_tree(dir.string());
  }
  ~RunDir() { remove_tree(dir.string()); }
  nlohmann::json go(const job::JobConfig& cfg, int64_t stop_after = 0) const {
    job::JobOptions o;
    o.run_dir = dir.string();
    o.plot = false;
    o.stop_after_rl_steps = stop_after;
    return job::run_job(cfg, o);
  }
  std::vector<nlohmann::json> rows(const std::string& phase) const {
    std::vector<nlohmann::json> out;
    for (auto& r : metrics::read_jsonl((dir / "metrics.jsonl").string())) {
      if (r["phase"] == phase) out.push_back(std::move(r));
    }
    return out;
  }
};

std::vector<std::string> in_mode(const std::string& mode, std::vector<std::string> overrides) {
  overrides.push_back("runtime.mode=\"" + mode + "\"");
  overrides.push_back("rollout.num_workers=1");
  return overrides;
}

TEST(JobRules, BothModesWriteOneRowShapeAndOneThroughputDefinition) {
  for (const std::string& mode : kModes) {
    SCOPED_TRACE(mode);
    RunDir r("rows-" + mode);
    nlohmann::json s = r.go(tiny_job(in_mode(mode, {"train.sft_steps=10"})));
    EXPECT_EQ(s["mode"], mode);
    EXPECT_EQ(s["steps"]["rl"], 6);
    for (const auto& row : r.rows("sft")) EXPECT_TRUE(row.contains("aux_loss")) << row.dump();
    const std::vector<nlohmann::json> rl = r.rows("rl");
    ASSERT_EQ(rl.size(), 6u);
    double step_s = 0;
    for (const auto& row : rl) {
      for (const char* key : {"reward", "loss", "pg_loss", "value_loss", "kl", "entropy", "aux_loss", "clip_frac",
                              "approx_kl", "behav_weight", "grad_norm", "lr", "response_len", "samples",
                              "experience_s", "train_s", "step_s", "rollout_tokens_per_s", "flat_groups"}) {
        EXPECT_TRUE(row.contains(key)) << key << " missing in " << row.dump();
      }
      EXPECT_EQ(row["samples"], 16);
      step_s += row["step_s"].get<double>();
    }
    const nlohmann::json& t = s["throughput"];
    EXPECT_EQ(t["samples"], 6 * 16);
    // samples_per_s is per second of RL steps, the sum of the rows' step_s in both modes.
    EXPECT_NEAR(t["rl_seconds"].get<double>(), step_s, 1e-6 * step_s);
    EXPECT_NEAR(t["samples_per_s"].get<double>(), 96 / step_s, 1e-6 * 96 / step_s);
    EXPECT_LT(t["rl_seconds"].get<double>(), s["wall_s"].get<double>());
    for (const char* key : {"response_tokens_per_s", "rollout_tokens_per_s", "train_tokens_per_s"}) {
      EXPECT_GT(t[key].get<double>(), 0) << key;
    }
  }
}

TEST(JobRules, PpoExportsTheValueHeadInBothModes) {
  for (const std::string& mode : kModes) {
    SCOPED_TRACE(mode);
    RunDir r("ppo-" + mode);
    r.go(tiny_job(in_mode(mode, {"algorithm.algorithm=\"ppo\"", "train.steps=2"})));
    EXPECT_TRUE(fs::exists(r.dir / "final_model" / "value_head.safetensors"));
    double value_loss = 0;  // the critic starts at 0: any reward makes its loss positive
    for (const auto& row : r.rows("rl")) value_loss += row["value_loss"].get<double>();
    EXPECT_GT(value_loss, 0);
  }
}

TEST(JobRules, AnUnreadableCheckpointIsAnErrorNotAFreshStart) {
  for (const std::string& mode : kModes) {
    SCOPED_TRACE(mode);
    RunDir r("corrupt-" + mode);
    const job::JobConfig cfg = tiny_job(in_mode(mode, {"train.sft_steps=0", "train.steps=2"}));
    r.go(cfg);
    int corrupted = 0;
    for (const auto& e : fs::recursive_directory_iterator(r.dir / "store" / job::kCheckpointRoot)) {
      if (e.path().filename() == store::kManifestName) {
        std::ofstream(e.path(), std::ios::trunc) << "{not a manifest";
        ++corrupted;
      }
    }
    ASSERT_GT(corrupted, 0);
    try {
      r.go(cfg);
      ADD_FAILURE() << "a run over an unreadable checkpoint started instead of failing";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("manifest"), std::string::npos) << e.what();
    }
  }
}

TEST(JobRules, AsyncStopsAfterAStepAndResumesWithNoTaskTrainedTwice) {
  RunDir r("stop-async");
  // Stale records are generated again (not dropped), so every task is trained once.
  const job::JobConfig cfg = tiny_job(in_mode("async", {"train.sft_steps=5", "runtime.stale_policy=\"regenerate\""}));
  nlohmann::json stopped = r.go(cfg, 3);
  EXPECT_EQ(stopped["stopped_at_rl_step"], 3);
  nlohmann::json s = r.go(cfg);
  EXPECT_EQ(s["steps"]["rl"], 6);
  std::set<std::string> tasks;
  std::map<int64_t, int> per_step;
  for (const auto& line : metrics::read_jsonl((r.dir / "trained.jsonl").string())) {
    EXPECT_TRUE(tasks.insert(line["task_id"].get<std::string>()).second) << "trained twice: " << line.dump();
    ++per_step[line["step"].get<int64_t>()];
  }
  std::string tasks_seen;
  for (const std::string& t : tasks) tasks_seen += t + " ";
  ASSERT_EQ(per_step.size(), 6u);
  for (const auto& [step, n] : per_step) EXPECT_EQ(n, 4) << "step " << step << "; tasks trained: " << tasks_seen;
  EXPECT_EQ(r.rows("rl").size(), 6u);
}

// The kept fraction sizes the extra sampling rounds; it rides in the checkpoint, so a resumed
// run draws the same rounds (and prompts) as the uninterrupted one.
TEST(JobRules, SyncDynamicSamplingResumesOnTheSameCurve) {
  const job::JobConfig cfg =
      tiny_job({"rollout.dynamic_sampling=true", "rollout.max_sampling_rounds=8", "train.steps=12"});
  RunDir full("dyn-full"), resumed("dyn-resumed");
  full.go(cfg);
  EXPECT_EQ(resumed.go(cfg, 4)["stopped_at_rl_step"], 4);
  resumed.go(cfg);
  const std::vector<nlohmann::json> a = full.rows("rl"), b = resumed.rows("rl");
  ASSERT_EQ(a.size(), 12u);
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    for (const char* key : {"step", "loss", "reward", "samples", "groups_filtered"}) {
      EXPECT_EQ(a[i][key], b[i][key]) << key << " of row " << i;
    }
  }
}

}  // namespace
}  // namespace moerl::e2e
