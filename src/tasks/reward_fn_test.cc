// Reward functions: the verifier kind, a plugged-in kind through the registry, and errors.
#include "tasks/reward_fn.h"

#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "base/error.h"
#include "tasks/registry.h"

namespace moerl::tasks {
namespace {

// Stands in for a scoring model: reward = answer length / 10, in [0, 1].
class LengthRewardFn : public RewardFn {
 public:
  explicit LengthRewardFn(double scale) : scale_(scale) {}
  std::string name() const override { return "length"; }
  std::vector<double> score(const std::vector<TaskItem>& items, const std::vector<std::string>& c) override {
    std::vector<double> out;
    for (const auto& s : c) out.push_back(scale_ * static_cast<double>(s.size()));
    return out;
  }

 private:
  double scale_;
};

TEST(RewardFn, VerifierIsTheDefault) {
  ConfigDoc doc = ConfigDoc::parse("[task]\nname = \"addition\"\nformat_reward = 0.1\n", "job.toml");
  ConfigTable t = doc.root().table("task");
  std::shared_ptr<const Task> task = make_task(t);
  auto fn = make_reward_fn(t, task);
  t.done();
  EXPECT_EQ(fn->name(), "verifier");
  std::vector<TaskItem> items = {{"a", "1+2=", "3"}, {"b", "5+5=", "10"}, {"c", "1+1=", "2"}};
  EXPECT_EQ(fn->score(items, {"3", "11", "x"}), (std::vector<double>{1.0, 0.1, 0.0}));
  EXPECT_EQ(fn->range().max, 1.0);
  EXPECT_THROW(fn->score(items, {"3"}), Error);
}

TEST(RewardFn, PluggedKindReadsItsOwnKeys) {
  register_reward_fn("length_test", [](ConfigTable& t, std::shared_ptr<const Task>) {
    return std::make_unique<LengthRewardFn>(t.number("length_scale", 0.1));
  });
  EXPECT_THROW(register_reward_fn("length_test", nullptr), Error);
  ConfigDoc doc = ConfigDoc::parse(
      "[task]\nname = \"copy\"\nreward = \"length_test\"\nlength_scale = 0.25\n", "job.toml");
  ConfigTable t = doc.root().table("task");
  std::shared_ptr<const Task> task = make_task(t);
  auto fn = make_reward_fn(t, task);
  t.done();
  EXPECT_EQ(fn->name(), "length");
  EXPECT_EQ(fn->score({task->item(Split::kTrain, 0), task->item(Split::kTrain, 1)}, {"ab", "abcd"}),
            (std::vector<double>{0.5, 1.0}));
}

// A scoring model stand-in: score = number of 'a' in prompt + completion, minus 1.
TEST(RewardFn, TextScorerAdapter) {
  auto scorer = [](const std::vector<std::string>& texts) {
    std::vector<double> out;
    for (const auto& s : texts) out.push_back(static_cast<double>(std::count(s.begin(), s.end(), 'a')) - 1.0);
    return out;
  };
  std::vector<TaskItem> items = {{"x", "a:", ""}, {"y", "b:", ""}};
  TextScorerRewardFn raw("model", scorer, Squash::kNone);
  EXPECT_EQ(raw.score(items, {"aa", "b"}), (std::vector<double>{2.0, -1.0}));
  EXPECT_TRUE(std::isinf(raw.range().max));
  TextScorerRewardFn sig("model", scorer, Squash::kSigmoid);
  std::vector<double> s = sig.score(items, {"", "a"});  // raw 0 and 0 -> 0.5, 0.5
  EXPECT_DOUBLE_EQ(s[0], 0.5);
  EXPECT_DOUBLE_EQ(s[1], 0.5);
  EXPECT_NEAR(sig.score(items, {"a", ""})[0], 0.7310586, 1e-7);  // sigmoid(1)
  EXPECT_EQ(sig.range().max, 1.0);
  TextScorerRewardFn bad("model", [](const std::vector<std::string>& t) { return std::vector<double>(t.size(), NAN); },
                         Squash::kNone);
  EXPECT_THROW(bad.score(items, {"a", "b"}), Error);
}

TEST(RewardFn, UnknownKindListsTheRegisteredOnes) {
  ConfigDoc doc = ConfigDoc::parse("[task]\nname = \"copy\"\nreward = \"model\"\n", "job.toml");
  ConfigTable t = doc.root().table("task");
  std::shared_ptr<const Task> task = make_task(t);
  try {
    make_reward_fn(t, task);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("task.reward"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("verifier"), std::string::npos) << e.what();
  }
}

TEST(TaskRegistry, CustomTask) {
  class Echo : public Task {
   public:
    std::string name() const override { return "echo_test"; }
    TaskItem item(Split s, uint64_t i) const override {
      return {"e" + std::to_string(i), std::string(split_name(s)) + std::to_string(i) + ":", "ok"};
    }
    double reward(const TaskItem& it, std::string_view c) const override { return answer_text(c) == it.answer; }
    TaskLimits limits() const override { return {12, 2}; }
  };
  register_task("echo_test", [](ConfigTable&, const TaskCommon&) { return std::make_unique<Echo>(); });
  auto names = task_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "echo_test"), names.end());
  ConfigDoc doc = ConfigDoc::parse("[task]\nname = \"echo_test\"\n", "job.toml");
  ConfigTable t = doc.root().table("task");
  auto task = make_task(t);
  EXPECT_EQ(task->items(Split::kHeldOut, 4, 2)[1].prompt, "heldout5:");
  EXPECT_THROW(register_task("addition", nullptr), Error);
}

}  // namespace
}  // namespace moerl::tasks
