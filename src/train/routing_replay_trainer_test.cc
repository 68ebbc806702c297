// Routing replay through the RL path: a rollout whose router breaks near-ties the other way
// records its experts; with algorithm.routing_replay = "rollout" the trainer's pi_old equals
// the behaviour logprobs, without it they differ; a batch without recorded routing is a clear
// error when replay is on.
#include <gtest/gtest.h>

#include "base/error.h"
#include "model/model.h"
#include "model/test_util.h"
#include "model/tokenizer.h"
#include "rollout/group_rollout.h"
#include "tasks/registry.h"
#include "tasks/reward_fn.h"
#include "train/policy_trainer.h"

namespace moerl::train {
namespace {

std::vector<runtime::ExperienceRecord> rollout_records(model::Model& rollout_policy, bool record) {
  model::CharTokenizer tok;
  ConfigDoc doc = ConfigDoc::parse("[task]\nname = \"addition\"\ndigits = 1\nseed = 4\n", "task.toml");
  ConfigTable tt = doc.root().table("task");
  std::shared_ptr<const tasks::Task> task = tasks::make_task(tt);
  tasks::VerifierRewardFn reward(task);
  rollout::RolloutConfig rc{.max_new_tokens = 6, .record_routing = record};
  rollout::GroupRollout ro(rollout_policy, tok, reward, rc, "w");
  std::vector<runtime::TaskUnit> units;
  for (uint64_t i = 0; i < 2; ++i) units.push_back(rollout::make_task_unit(task->item(tasks::Split::kTrain, i), tok, 3, i));
  return ro.run(units, /*seed=*/11, /*version=*/0);
}

double mismatch(model::Model& trainer_policy, const std::vector<runtime::ExperienceRecord>& recs, bool replay) {
  TrainerConfig c;
  c.loss.group_size = 3;
  c.loss.routing_replay = replay ? rl::RoutingReplay::kRollout : rl::RoutingReplay::kOff;
  c.adamw.lr = 0;  // measure only: the two calls share the trainer policy
  c.schedule.lr = 0;
  PolicyTrainer t(trainer_policy, nullptr, c, 0);
  return t.train_step(recs).mismatch_abs;
}

TEST(RoutingReplayTrainer, ReplayAlignsTrainerAndRolloutLogprobs) {
  model::Model rollout = model::init_random(model::testing::tie_config(), 31);
  model::Model trainer = model::init_random(model::testing::tie_config(), 31);
  model::testing::make_router_ties(rollout, +1e-6, 8);
  model::testing::make_router_ties(trainer, -1e-6, 8);
  auto recs = rollout_records(rollout, /*record=*/true);
  ASSERT_FALSE(recs[0].samples[0].routed_experts.empty());
  const double with = mismatch(trainer, recs, true), without = mismatch(trainer, recs, false);
  EXPECT_LT(with, 1e-5);
  EXPECT_GT(without, 1e-3);
}

TEST(RoutingReplayTrainer, ReplayWithoutRecordedRoutingIsAClearError) {
  model::Model m = model::init_random(model::testing::tie_config(), 32);
  auto recs = rollout_records(m, /*record=*/false);
  try {
    mismatch(m, recs, true);
    ADD_FAILURE() << "replay trained a batch that carries no routing";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no recorded routing"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moerl::train
