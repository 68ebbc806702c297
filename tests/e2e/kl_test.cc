// The KL penalty as a user runs it (`algorithm.kl_coef > 0`): the job starts in both modes,
// with and without SFT; the reference is the policy as RL starts, pinned by a checkpoint
// (kept by retention, named in every later checkpoint's state); a stopped and resumed PPO run
// with its value head, AdamW moments, LR schedule and reference reproduces the uninterrupted
// curve bit for bit.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "base/files.h"
#include "base/jsonl.h"
#include "e2e/tiny_job.h"
#include "job/roles.h"
#include "store/commit.h"
#include "store/object_store.h"

namespace moerl::e2e {
namespace {

namespace fs = std::filesystem;

struct RunDir {
  fs::path dir;
  explicit RunDir(const std::string& tag)
      : dir(fs::temp_directory_path() / ("moerl-kl-" + tag + "-" + std::to_string(::getpid()))) {
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
  std::vector<nlohmann::json> rl_rows() const {
    std::vector<nlohmann::json> out;
    for (auto& r : metrics::read_jsonl((dir / "metrics.jsonl").string())) {
      if (r["phase"] == "rl") out.push_back(std::move(r));
    }
    return out;
  }
  // The reference commit named by the newest checkpoint's state.
  std::string reference() const {
    auto store = store::open_store((dir / "store").string());
    auto latest = store::CommitReader::latest(*store, job::kCheckpointRoot);
    if (!latest) return "";
    auto state = nlohmann::json::parse(latest->get_bytes("trainer_state.json"));
    return state["extra"].value("reference", std::string());
  }
};

TEST(KlPenalty, TrainsInBothModesWithAndWithoutSft) {
  for (const std::string mode : {"sync", "async"}) {
    for (const int sft : {0, 10}) {
      SCOPED_TRACE(mode + " with " + std::to_string(sft) + " SFT steps");
      RunDir r(mode + std::to_string(sft));
      // keep_checkpoints = 1: the pinned reference commit must survive retention anyway.
      const job::JobConfig cfg =
          tiny_job({"runtime.mode=\"" + mode + "\"", "rollout.num_workers=1", "algorithm.kl_coef=0.05",
                    "train.sft_steps=" + std::to_string(sft), "train.steps=4", "train.checkpoint_every=1",
                    "train.keep_checkpoints=1"});
      nlohmann::json s = r.go(cfg);
      EXPECT_EQ(s["steps"]["rl"], 4);
      const auto rows = r.rl_rows();
      ASSERT_EQ(rows.size(), 4u);
      // Step 1 trains the reference itself (KL 0); after an update the policy has moved away.
      EXPECT_NEAR(rows[0]["kl"].get<double>(), 0.0, 1e-6);
      EXPECT_GT(rows[3]["kl"].get<double>(), 0.0);
      const std::string ref = r.reference();
      ASSERT_FALSE(ref.empty()) << "the state does not name the reference";
      // The reference is the policy as RL started: SFT's last commit, or one made at RL start.
      EXPECT_NE(ref.find("step-00000000-sft-" + std::string(sft ? "000010" : "000000")), std::string::npos) << ref;
      auto store = store::open_store((r.dir / "store").string());
      EXPECT_NO_THROW(store::CommitReader::open(*store, ref)) << "the pinned reference was deleted";
    }
  }
}

// PPO (critic on the trunk, GAE), KL in the loss, SFT first: stop after RL step 3 and resume.
// Every figure of every row equals the uninterrupted run's: the optimizer moments, the step
// counter (warmup + cosine), the value head and the reference all came back.
TEST(KlPenalty, PpoResumeReproducesTheUninterruptedCurveBitForBit) {
  const job::JobConfig cfg = tiny_job({"algorithm.algorithm=\"ppo\"", "algorithm.kl_coef=0.05",
                                       "train.sft_steps=10", "train.steps=6", "train.keep_checkpoints=1"});
  RunDir full("ppo-full"), resumed("ppo-resumed");
  full.go(cfg);
  EXPECT_EQ(resumed.go(cfg, 3)["stopped_at_rl_step"], 3);
  resumed.go(cfg);
  const auto a = full.rl_rows(), b = resumed.rl_rows();
  ASSERT_EQ(a.size(), 6u);
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    for (const char* key : {"step", "loss", "pg_loss", "value_loss", "kl", "grad_norm", "lr", "reward"}) {
      EXPECT_EQ(a[i][key], b[i][key]) << key << " of row " << i;
    }
  }
  EXPECT_GT(a[5]["kl"].get<double>(), 0.0);
  EXPECT_EQ(full.reference(), resumed.reference());
}

}  // namespace
}  // namespace moerl::e2e
