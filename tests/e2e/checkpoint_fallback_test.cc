// A damaged newest checkpoint (a shard altered after commit: same size, other bytes) used to
// stop every resume with a sha256 mismatch, a crash loop under Kubernetes. The resume now
// falls back to the previous complete checkpoint with a warning naming the damaged one, and
// the rerun reproduces the uninterrupted curve; with every checkpoint damaged it is an error.
// A resume also removes the objects of checkpoints a crashed process never committed, once
// they are an hour old (a younger one may be a writer still at work).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>

#include "base/error.h"
#include "base/files.h"
#include "base/jsonl.h"
#include "e2e/tiny_job.h"
#include "job/roles.h"
#include "store/commit.h"

namespace moerl::train {
namespace {

namespace fs = std::filesystem;

nlohmann::json run(const fs::path& dir, int64_t stop_after) {
  job::JobOptions o;
  o.run_dir = dir.string();
  o.plot = false;
  o.stop_after_rl_steps = stop_after;
  return job::run_job(e2e::tiny_job(), o);
}

// (phase, step) -> loss of the LAST row for it: a resume from an older checkpoint writes the
// steps after it again.
std::map<std::pair<std::string, int64_t>, double> curve(const fs::path& dir) {
  std::map<std::pair<std::string, int64_t>, double> out;
  for (const auto& row : metrics::read_jsonl((dir / "metrics.jsonl").string())) {
    const std::string phase = row["phase"].get<std::string>();
    out[{phase, (phase == "rl" ? row["step"] : row["sft_step"]).get<int64_t>()}] = row["loss"].get<double>();
  }
  return out;
}

// Flips one byte in the middle of the commit's largest shard (the size stays the same).
std::string damage(const fs::path& commit_dir) {
  fs::path biggest;
  for (const auto& e : fs::recursive_directory_iterator(commit_dir)) {
    if (e.is_regular_file() && e.path().filename() != store::kManifestName &&
        (biggest.empty() || e.file_size() > fs::file_size(biggest))) {
      biggest = e.path();
    }
  }
  std::fstream f(biggest, std::ios::in | std::ios::out | std::ios::binary);
  const auto mid = static_cast<std::streamoff>(fs::file_size(biggest) / 2);
  f.seekg(mid);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(mid);
  f.write(&c, 1);
  return biggest.string();
}

std::vector<fs::path> commits(const fs::path& run_dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(run_dir / "store" / "ckpt")) {
    if (fs::exists(e.path() / store::kManifestName)) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(CheckpointFallback, DamagedNewestCheckpointResumesFromThePreviousOne) {
  const fs::path base = fs::temp_directory_path() / ("moerl-ckpt-fallback-" + std::to_string(::getpid()));
  remove_tree(base.string());
  run(base / "full", 0);
  const auto full = curve(base / "full");

  const fs::path dir = base / "damaged";
  EXPECT_EQ(run(dir, 3)["stopped_at_rl_step"], 3);
  std::vector<fs::path> before = commits(dir);
  ASSERT_GE(before.size(), 2u) << "the SFT checkpoint and the one at RL step 3";
  const std::string altered = damage(before.back());

  testing::internal::CaptureStderr();
  nlohmann::json summary = run(dir, 0);
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(summary["steps"]["rl"], 6);
  EXPECT_NE(log.find("the newest checkpoint is damaged"), std::string::npos) << log;
  EXPECT_NE(log.find(before.back().filename().string()), std::string::npos) << "the warning names the damaged commit";
  EXPECT_NE(log.find("resumed from the previous complete one"), std::string::npos) << log;
  // Resumed after SFT, RL steps 1-3 ran again: the curve is the uninterrupted run's.
  EXPECT_EQ(curve(dir), full);
  remove_tree(base.string());
}

TEST(CheckpointFallback, EveryCheckpointDamagedIsAnErrorNamingTheStore) {
  const fs::path dir = fs::temp_directory_path() / ("moerl-ckpt-all-damaged-" + std::to_string(::getpid()));
  remove_tree(dir.string());
  run(dir, 3);
  for (const fs::path& c : commits(dir)) damage(c);
  try {
    run(dir, 0);
    ADD_FAILURE() << "resumed from damaged checkpoints";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("every checkpoint under"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("--fresh"), std::string::npos) << e.hint();
  }
  remove_tree(dir.string());
}

TEST(CheckpointFallback, ResumeRemovesOrphanedShardsOfUncommittedCheckpoints) {
  const fs::path dir = fs::temp_directory_path() / ("moerl-ckpt-orphans-" + std::to_string(::getpid()));
  remove_tree(dir.string());
  run(dir, 3);
  const fs::path ckpt = dir / "store" / "ckpt";
  fs::create_directories(ckpt / "step-00000009-sft-000040" / "model");
  fs::create_directories(ckpt / "step-00000010-sft-000040");
  const fs::path old_shard = ckpt / "step-00000009-sft-000040" / "model" / "model.safetensors";
  const fs::path young_shard = ckpt / "step-00000010-sft-000040" / "optimizer.safetensors";
  std::ofstream(old_shard) << "half a checkpoint";
  std::ofstream(young_shard) << "a writer at work";
  fs::last_write_time(old_shard, fs::file_time_type::clock::now() - std::chrono::hours(2));
  const size_t committed = commits(dir).size();

  testing::internal::CaptureStderr();
  EXPECT_EQ(run(dir, 0)["steps"]["rl"], 6);
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(fs::exists(old_shard)) << log;
  EXPECT_TRUE(fs::exists(young_shard));
  EXPECT_NE(log.find("removed 1 object(s) of uncommitted checkpoints"), std::string::npos) << log;
  EXPECT_GE(commits(dir).size(), std::min<size_t>(committed, 2));  // committed ones untouched
  remove_tree(dir.string());
}

}  // namespace
}  // namespace moerl::train
