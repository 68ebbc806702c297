// LossConfig: reading [algorithm], algorithm-dependent defaults, and validation errors.
#include "rl/loss_config.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace moerl::rl {
namespace {

LossConfig read(const std::string& text, std::vector<std::string> overrides = {}) {
  ConfigDoc doc = ConfigDoc::parse(text, "job.toml", overrides);
  ConfigTable t = doc.root().table("algorithm");
  LossConfig c = read_loss_config(t);
  t.done();
  return c;
}

std::string error_of(const std::string& text, std::vector<std::string> overrides = {}) {
  try {
    read(text, overrides);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(LossConfig, ReadsEveryKey) {
  LossConfig c = read(R"(
[algorithm]
algorithm = "grpo"
group_size = 4
adv_estimator = "rloo"
eps_low = 0.2
eps_high = 0.28
dual_clip = 3.0
loss_agg = "seq-mean-token-sum-norm"
kl_coef = 0.01
kl_estimator = "k2"
kl_in = "reward"
entropy_coef = 0.001
aux_loss_coef = 0.02
z_loss_coef = 0.0
behaviour_correction = "decoupled"
tis_cap = 4.0
gamma = 0.99
lambda = 0.9
value_clip = 0.0
value_coef = 0.25
)");
  EXPECT_EQ(c.algorithm, Algorithm::kGrpo);
  EXPECT_EQ(c.group_size, 4);
  EXPECT_EQ(c.adv_estimator, AdvEstimator::kRloo);
  EXPECT_DOUBLE_EQ(c.eps_high, 0.28);
  EXPECT_DOUBLE_EQ(c.dual_clip, 3.0);
  EXPECT_EQ(c.loss_agg, LossAgg::kSeqMeanTokenSumNorm);
  EXPECT_DOUBLE_EQ(c.kl_coef, 0.01);
  EXPECT_EQ(c.kl_estimator, KlEstimator::kK2);
  EXPECT_EQ(c.kl_in, KlPlacement::kReward);
  EXPECT_DOUBLE_EQ(c.entropy_coef, 0.001);
  EXPECT_DOUBLE_EQ(c.aux_loss_coef, 0.02);
  EXPECT_DOUBLE_EQ(c.z_loss_coef, 0.0);
  EXPECT_EQ(c.behaviour_correction, BehaviourCorrection::kDecoupled);
  EXPECT_DOUBLE_EQ(c.tis_cap, 4.0);
  EXPECT_DOUBLE_EQ(c.gamma, 0.99);
  EXPECT_DOUBLE_EQ(c.lambda, 0.9);
  EXPECT_DOUBLE_EQ(c.value_clip, 0.0);
  EXPECT_DOUBLE_EQ(c.value_coef, 0.25);
}

TEST(LossConfig, DefaultsFollowTheAlgorithm) {
  LossConfig grpo = read("[algorithm]\n");
  EXPECT_EQ(grpo.adv_estimator, AdvEstimator::kGrpo);
  EXPECT_EQ(grpo.group_size, 8);
  EXPECT_FALSE(grpo.uses_critic());
  LossConfig ppo = read("[algorithm]\nalgorithm = \"ppo\"\n");
  EXPECT_EQ(ppo.adv_estimator, AdvEstimator::kGae);
  EXPECT_EQ(ppo.group_size, 1);
  EXPECT_TRUE(ppo.uses_critic());
  EXPECT_EQ(read("", {"algorithm.adv_estimator=dr_grpo"}).adv_estimator, AdvEstimator::kDrGrpo);
}

TEST(LossConfig, ErrorsNameTheKeyAndValues) {
  std::string e = error_of("[algorithm]\nloss_agg = \"mean\"\n");
  EXPECT_NE(e.find("algorithm.loss_agg"), std::string::npos) << e;
  EXPECT_NE(e.find("seq-mean-token-sum-norm"), std::string::npos) << e;
  e = error_of("[algorithm]\nalgorithm = \"ppo\"\nadv_estimator = \"grpo\"\n");
  EXPECT_NE(e.find("adv_estimator = \"grpo\""), std::string::npos) << e;
  EXPECT_NE(e.find("HINT"), std::string::npos) << e;
  e = error_of("[algorithm]\ndual_clip = 0.5\n");
  EXPECT_NE(e.find("dual_clip = 0.5"), std::string::npos) << e;
  e = error_of("[algorithm]\nbehaviour_correction = \"tis\"\ntis_cap = 0.5\n");
  EXPECT_NE(e.find("tis_cap = 0.5"), std::string::npos) << e;
  e = error_of("[algorithm]\ngroup_size = 1\n");
  EXPECT_NE(e.find("group_size = 1"), std::string::npos) << e;
  e = error_of("[algorithm]\ngamma = 1.5\n");
  EXPECT_NE(e.find("algorithm.gamma"), std::string::npos) << e;
  e = error_of("[algorithm]\nkl_estimator = \"k4\"\n");
  EXPECT_NE(e.find("k1, k2, k3"), std::string::npos) << e;
  e = error_of("[algorithm]\nalgorithm = \"ppo\"\nvalue_coef = 0.0\n");
  EXPECT_NE(e.find("value_coef"), std::string::npos) << e;
  e = error_of("[algorithm]\neps_lo = 0.1\n");  // typo caught by done()
  EXPECT_NE(e.find("eps_lo"), std::string::npos) << e;
}

}  // namespace
}  // namespace moerl::rl
