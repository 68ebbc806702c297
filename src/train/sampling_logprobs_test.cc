// RL logprobs are those of the distribution the rollout sampled from (temperature, top-k,
// top-p): the behaviour logprob a rollout records equals log q(token) computed by hand from
// the model's logits, the trainer's pi_old equals it for the same weights, and the gradient
// of log q on a toy vocabulary matches an enumerated reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/model.h"
#include "model/sampler.h"
#include "model/test_util.h"
#include "model/tokenizer.h"
#include "rollout/group_rollout.h"
#include "tasks/registry.h"
#include "tasks/reward_fn.h"
#include "train/packed_batch.h"
#include "train/policy_trainer.h"

namespace moerl::train {
namespace {

// log q(a) for q = softmax of the sampling distribution, enumerated over the vocabulary in
// plain loops: logits / T, keep the top_k largest, renormalise.
std::vector<double> enumerated_logq(const std::vector<double>& z, double temperature, int top_k) {
  const int V = static_cast<int>(z.size());
  std::vector<int> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return z[a] > z[b]; });
  std::vector<bool> keep(V, top_k == 0);
  for (int i = 0; i < top_k; ++i) keep[order[i]] = true;
  double norm = 0;
  for (int j = 0; j < V; ++j) {
    if (keep[j]) norm += std::exp(z[j] / temperature);
  }
  std::vector<double> out(V, -1e30);
  for (int j = 0; j < V; ++j) {
    if (keep[j]) out[j] = z[j] / temperature - std::log(norm);
  }
  return out;
}

TEST(SamplingLogprobs, GradientOfLogQMatchesTheEnumeratedReference) {
  const std::vector<double> z = {0.3, -1.2, 2.0, 0.9, -0.4, 1.7};
  const double T = 0.7;
  const int K = 2;  // support {2, 5}
  const model::SamplingConfig s{.temperature = T, .top_k = K};
  const std::vector<double> want = enumerated_logq(z, T, K);
  for (int a : {2, 5}) {
    at::Tensor logits = at::tensor(at::ArrayRef<double>(z)).to(at::kFloat).reshape({1, 6}).requires_grad_(true);
    at::Tensor lq = at::log_softmax(model::sampling_logits(logits, s), -1);
    EXPECT_NEAR(lq[0][a].item<double>(), want[a], 1e-6);
    lq[0][a].backward();
    // d log q(a) / dz_j = (1[j = a] - q_j) / T on the support, 0 off it.
    for (int j = 0; j < 6; ++j) {
      const bool in = j == 2 || j == 5;
      const double g = in ? ((j == a ? 1.0 : 0.0) - std::exp(want[j])) / T : 0.0;
      EXPECT_NEAR(logits.grad()[0][j].item<double>(), g, 1e-6) << "token " << a << ", logit " << j;
    }
  }
  // Untempered settings leave the logits alone (no copy, bit for bit).
  at::Tensor x = at::randn({2, 6});
  EXPECT_TRUE(model::sampling_logits(x, model::SamplingConfig{}).is_same(x));
}

TEST(SamplingLogprobs, TopPKeepsTheSmallestSetReachingP) {
  // softmax([2, 1, 0, -1]) = .644 .237 .087 .032: top_p 0.8 keeps the first two.
  at::Tensor x = at::tensor({2.0f, 1.0f, 0.0f, -1.0f}).reshape({1, 4});
  at::Tensor lq = at::log_softmax(model::sampling_logits(x, {.top_p = 0.8}), -1);
  const double norm = std::exp(2.0) + std::exp(1.0);
  EXPECT_NEAR(lq[0][0].item<double>(), 2.0 - std::log(norm), 1e-6);
  EXPECT_NEAR(lq[0][1].item<double>(), 1.0 - std::log(norm), 1e-6);
  EXPECT_EQ(lq.exp()[0][2].item<float>(), 0.0f);
  EXPECT_TRUE(std::isfinite(lq[0][3].item<float>())) << "a cut token's logprob must stay finite";
}

// A rollout at T = 0.7 and top_k = 2 records log q(token) (checked against a full forward of
// prompt + response scored by hand), and the trainer, scoring with the same settings and the
// same weights, finds pi_old equal to it.
TEST(SamplingLogprobs, BehaviourLogprobIsTheSampledDistributionsAndTheTrainerAgrees) {
  model::Model policy = model::init_random(model::testing::tiny_qwen3(), 17);
  model::CharTokenizer tok;
  ConfigDoc doc = ConfigDoc::parse("[task]\nname = \"addition\"\ndigits = 1\nseed = 2\n", "task.toml");
  ConfigTable tt = doc.root().table("task");
  std::shared_ptr<const tasks::Task> task = tasks::make_task(tt);
  tasks::VerifierRewardFn reward(task);
  const model::SamplingConfig s{.temperature = 0.7, .top_k = 2};
  rollout::RolloutConfig rc{.max_new_tokens = 4, .sampling = s};
  rollout::GroupRollout ro(policy, tok, reward, rc, "w");
  std::vector<runtime::TaskUnit> units;
  for (uint64_t i = 0; i < 2; ++i) units.push_back(rollout::make_task_unit(task->item(tasks::Split::kTrain, i), tok, 3, i));
  std::vector<runtime::ExperienceRecord> recs = ro.run(units, /*seed=*/5, /*version=*/0);

  for (const auto& r : recs) {
    for (const auto& smp : r.samples) {
      std::vector<int64_t> ids(smp.prompt_tokens.begin(), smp.prompt_tokens.end());
      ids.insert(ids.end(), smp.response_tokens.begin(), smp.response_tokens.end());
      at::Tensor in = at::tensor(ids).reshape({1, -1});
      at::Tensor logits = policy.forward({.input_ids = in}).logits_BTV[0];
      const size_t P = smp.prompt_tokens.size();
      for (size_t k = 0; k < smp.response_tokens.size(); ++k) {
        at::Tensor row = logits[P + k - 1].to(at::kDouble);
        std::vector<double> z(row.data_ptr<double>(), row.data_ptr<double>() + row.numel());
        const double want = enumerated_logq(z, 0.7, 2)[smp.response_tokens[k]];
        EXPECT_NEAR(smp.behaviour_logprobs[k], want, 1e-5) << "token " << k;
      }
    }
  }
  TrainerConfig c;
  c.loss.group_size = 3;
  c.sampling = s;
  PolicyTrainer t(policy, nullptr, c, tok.pad_id());
  StepStats st = t.train_step(recs);
  EXPECT_LT(st.mismatch_abs, 1e-5) << "trainer pi_old differs from the behaviour logprob";
  EXPECT_GT(st.num_tokens, 0);
}

}  // namespace
}  // namespace moerl::train
