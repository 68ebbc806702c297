// What JobConfig hands the trainer and the rollout for RL: async mode defaults to the TIS
// correction (none is an explicit, accepted choice), the trainer scores with the rollout's
// sampling settings, and routing replay turns recording on for the rollout.
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "job/job_config.h"

namespace moerl::job {
namespace {

JobConfig parse(const std::string& extra) {
  const std::string text = "[task]\nname = \"addition\"\ndigits = 1\n" + extra;
  return JobConfig::parse(ConfigDoc::parse(text, "rl.toml"));
}

TEST(JobConfigRl, AsyncDefaultsToTisAndKeepsAnExplicitChoice) {
  EXPECT_EQ(parse("").loss.behaviour_correction, rl::BehaviourCorrection::kNone);
  JobConfig a = parse("[runtime]\nmode = \"async\"\n");
  EXPECT_EQ(a.loss.behaviour_correction, rl::BehaviourCorrection::kTis);
  EXPECT_EQ(a.train.trainer.loss.behaviour_correction, rl::BehaviourCorrection::kTis);
  JobConfig none = parse("[runtime]\nmode = \"async\"\n[algorithm]\nbehaviour_correction = \"none\"\n");
  EXPECT_EQ(none.loss.behaviour_correction, rl::BehaviourCorrection::kNone);
  JobConfig mis = parse("[runtime]\nmode = \"async\"\n[algorithm]\nbehaviour_correction = \"mis\"\n");
  EXPECT_EQ(mis.loss.behaviour_correction, rl::BehaviourCorrection::kMis);
}

// The experience stream is trimmed behind committed checkpoints: an async run checkpoints
// by default so its queue service's memory stays bounded; an explicit 0 is kept.
TEST(JobConfigRl, AsyncCheckpointsByDefaultAndKeepsAnExplicitInterval) {
  EXPECT_EQ(parse("").train.checkpoint_every, 0);
  EXPECT_EQ(parse("[runtime]\nmode = \"async\"\n").train.checkpoint_every, TrainSection::kAsyncCheckpointEvery);
  EXPECT_GT(TrainSection::kAsyncCheckpointEvery, 0);
  EXPECT_EQ(parse("[runtime]\nmode = \"async\"\n[train]\ncheckpoint_every = 0\n").train.checkpoint_every, 0);
  EXPECT_EQ(parse("[runtime]\nmode = \"async\"\n[train]\ncheckpoint_every = 3\n").train.checkpoint_every, 3);
}

TEST(JobConfigRl, TrainerScoresWithTheRolloutsSamplingSettings) {
  JobConfig j = parse("[rollout]\ntemperature = 0.7\ntop_k = 5\ntop_p = 0.9\n");
  EXPECT_DOUBLE_EQ(j.train.trainer.sampling.temperature, 0.7);
  EXPECT_EQ(j.train.trainer.sampling.top_k, 5);
  EXPECT_DOUBLE_EQ(j.train.trainer.sampling.top_p, 0.9);
}

TEST(JobConfigRl, RoutingReplayMakesTheRolloutRecordRouting) {
  EXPECT_FALSE(parse("").rollout.gen.record_routing);
  JobConfig j = parse("[algorithm]\nrouting_replay = \"rollout\"\n");
  EXPECT_TRUE(j.rollout.gen.record_routing);
  EXPECT_EQ(j.train.trainer.loss.routing_replay, rl::RoutingReplay::kRollout);
}

// [train] activation_checkpointing and max_tokens_per_micro_batch reach the trainer (off by
// default); a negative budget or a non-boolean switch is an error naming the key.
TEST(JobConfigRl, RealSizeTrainingKeysReachTheTrainerAndBadValuesNameTheKey) {
  const train::TrainerConfig d = parse("").train.trainer;
  EXPECT_EQ(d.activation_checkpointing, model::LayerCheckpointing::kNone);
  EXPECT_EQ(d.max_tokens_per_micro_batch, 0);
  const train::TrainerConfig t =
      parse("[train]\nactivation_checkpointing = true\nmax_tokens_per_micro_batch = 8192\n").train.trainer;
  EXPECT_EQ(t.activation_checkpointing, model::LayerCheckpointing::kPerLayer);
  EXPECT_EQ(t.max_tokens_per_micro_batch, 8192);
  for (const std::string& bad : {std::string("max_tokens_per_micro_batch = -1"),
                                 std::string("max_tokens_per_micro_batch = 1.5"),
                                 std::string("activation_checkpointing = 1")}) {
    try {
      parse("[train]\n" + bad + "\n");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      const std::string key = bad.substr(0, bad.find(' '));
      EXPECT_NE(std::string(e.what()).find("train." + key), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace moerl::job
