// The in-process async job (trainer + worker threads) at its edges: a run in which dynamic
// sampling filters every group ends when the task budget is spent (no wait for batches that
// cannot come), commits its final checkpoint next to the SFT one, and its accounting balances.
#include <gtest/gtest.h>

#include <filesystem>

#include "base/deadline.h"
#include "base/files.h"
#include "base/jsonl.h"
#include "job/roles.h"
#include "e2e/async_test_util.h"

namespace moerl::train {
using namespace moerl::job;  // NOLINT: the job API under test
namespace {

TEST(AsyncJob, EveryGroupFilteredEndsAtTheBudgetAndBalances) {
  const std::string dir = testing::make_temp_dir("async-job");
  // An untrained policy scores 0 on 2-digit sums (format_reward 0): no group has a spread.
  std::string text = testing::tiny_config_text("mode = \"async\"\ntasks_per_lease = 4");
  text.replace(text.find("sft_steps = 0"), 13, "sft_steps = 2");
  text.replace(text.find("num_workers = 1"), 15,
               "num_workers = 1\ndynamic_sampling = true\nmax_sampling_rounds = 2");
  JobConfig cfg = JobConfig::load(testing::write_config(dir, text), {});
  JobOptions o;
  o.run_dir = dir + "/run";
  o.plot = false;
  const double t0 = now_seconds();
  nlohmann::json s = run_job(cfg, o);
  EXPECT_LT(now_seconds() - t0, 120.0);  // the trainer waits up to 600 s for a batch that can come
  const nlohmann::json& acc = s["accounting"];
  EXPECT_EQ(acc["tasks_created"], 4 * 4 * 2);  // steps x prompts_per_step x max_sampling_rounds
  EXPECT_EQ(acc["groups_filtered"], acc["tasks_created"]) << acc.dump();
  EXPECT_EQ(acc["samples_trained"], 0);
  EXPECT_EQ(acc["lost"], 0);
  EXPECT_EQ(s["steps"]["rl"], 0);
  EXPECT_EQ(s["steps"]["sft"], 2);
  // The SFT checkpoint and the final one are both at rl step 0: two commits, both readable.
  int commits = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/run/store/ckpt")) {
    if (e.is_directory() && e.path().filename().string().rfind("step-00000000-sft-000002", 0) == 0) ++commits;
  }
  EXPECT_EQ(commits, 2);
  remove_tree(dir);
}

}  // namespace
}  // namespace moerl::train
