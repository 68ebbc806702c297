// The in-process async job with a streaming worker ([rollout] streaming): rows fed from the
// queue as answers end, each group put as it ends, newer versions activated between decode
// steps. The run completes with nothing lost and every task trained once, and some trained
// groups were generated across two or more policy versions (trained.jsonl's version and
// newest_version), which a worker that activates versions only between batches never gives.
#include <gtest/gtest.h>

#include <set>

#include "base/files.h"
#include "base/jsonl.h"
#include "job/roles.h"
#include "e2e/async_test_util.h"

namespace moerl::train {
using namespace moerl::job;  // NOLINT: the job API under test
namespace {

nlohmann::json run_streaming_job(const std::string& dir) {
  // Answers of up to 24 tokens on 8 rows, groups of 4 and 4 prompts a step: each step's 16
  // samples take several refills, and the trainer publishes a version after every step.
  const std::string text = testing::tiny_config_text(
      "mode = \"async\"\ntasks_per_lease = 2\nmax_staleness = 8\nstale_policy = \"regenerate\"", "",
      {"rollout.max_new_tokens=24", "model.max_position_embeddings=64", "train.steps=8",
       "rollout.batch_rows=8", "rollout.streaming=true"});
  JobConfig cfg = JobConfig::load(testing::write_config(dir, text), {});
  JobOptions o;
  o.run_dir = dir + "/run";
  o.plot = false;
  return run_job(cfg, o);
}

TEST(AsyncStreaming, EveryTaskTrainedOnceAndGroupsSpanVersions) {
  const std::string dir = testing::make_temp_dir("async-streaming");
  const nlohmann::json s = run_streaming_job(dir);
  const nlohmann::json& acc = s["accounting"];
  EXPECT_EQ(s["steps"]["rl"], 8);
  EXPECT_EQ(acc["lost"], 0) << acc.dump();
  std::set<uint64_t> cursors;
  int spanning = 0, lines = 0;
  for (const nlohmann::json& t : metrics::read_jsonl(dir + "/run/trained.jsonl")) {
    ++lines;
    EXPECT_TRUE(cursors.insert(t.at("cursor").get<uint64_t>()).second) << "trained twice: " << t.dump();
    EXPECT_GE(t.at("newest_version").get<uint64_t>(), t.at("version").get<uint64_t>()) << t.dump();
    spanning += t.at("newest_version").get<uint64_t>() > t.at("version").get<uint64_t>();
  }
  EXPECT_EQ(lines, 8 * 4);
  EXPECT_GT(spanning, 0) << "no group ran across a version swap";
  EXPECT_EQ(acc["samples_trained"], 8 * 4 * 4) << acc.dump();
  // The per-token lag never exceeds the oldest version's lag of any record in the step.
  int rows = 0;
  for (const nlohmann::json& m : metrics::read_jsonl(dir + "/run/metrics.jsonl")) {
    if (!m.contains("token_lag_mean")) continue;
    ++rows;
    EXPECT_GE(m["token_lag_mean"].get<double>(), 0) << m.dump();
    EXPECT_LE(m["token_lag_mean"].get<double>(), m.at("staleness_max").get<double>() + 1e-9) << m.dump();
  }
  EXPECT_EQ(rows, 8);
  remove_tree(dir);
}

}  // namespace
}  // namespace moerl::train
