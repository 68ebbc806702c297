// Verifier-backed RewardFn and the reward-function registry (built in: verifier, http).
#include "tasks/reward_fn.h"

#include <cmath>
#include <limits>
#include <map>
#include <mutex>

#include "base/check.h"
#include "base/error.h"
#include "tasks/http_reward.h"

namespace moerl::tasks {

VerifierRewardFn::VerifierRewardFn(std::shared_ptr<const Task> task) : task_(std::move(task)) {
  MOERL_CHECK(task_ != nullptr);
}

std::vector<double> VerifierRewardFn::score(const std::vector<TaskItem>& items,
                                            const std::vector<std::string>& completions) {
  MOERL_CHECK_EQ(items.size(), completions.size());
  std::vector<double> out(items.size());
  for (size_t i = 0; i < items.size(); ++i) out[i] = task_->reward(items[i], completions[i]);
  return out;
}

TextScorerRewardFn::TextScorerRewardFn(std::string name, Scorer scorer, Squash squash)
    : name_(std::move(name)), scorer_(std::move(scorer)), squash_(squash) {
  MOERL_CHECK(scorer_ != nullptr);
}

std::vector<double> TextScorerRewardFn::score(const std::vector<TaskItem>& items,
                                              const std::vector<std::string>& completions) {
  MOERL_CHECK_EQ(items.size(), completions.size());
  std::vector<std::string> texts(items.size());
  for (size_t i = 0; i < items.size(); ++i) texts[i] = items[i].prompt + completions[i];
  std::vector<double> out = scorer_(texts);
  MOERL_CHECK_EQ(out.size(), texts.size()) << "scorer '" << name_ << "' returned a wrong count";
  for (double& v : out) {
    if (!std::isfinite(v)) {
      throw Error("reward '" + name_ + "' produced a non-finite score",
                  "check the scoring model checkpoint (NaN weights?)", ErrorCode::kInternal);
    }
    if (squash_ == Squash::kSigmoid) v = 1.0 / (1.0 + std::exp(-v));
  }
  return out;
}

RewardRange TextScorerRewardFn::range() const {
  if (squash_ == Squash::kSigmoid) return {0.0, 1.0};
  return {-std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
}

namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, RewardFnFactory> factories;  // guarded by mu
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;
    reg->factories["verifier"] = [](ConfigTable&, std::shared_ptr<const Task> task) {
      return std::make_unique<VerifierRewardFn>(std::move(task));
    };
    reg->factories["http"] = [](ConfigTable& t, std::shared_ptr<const Task> task) {
      return std::make_unique<HttpRewardFn>(read_http_reward_config(t, task ? task->name() : ""));
    };
    return reg;
  }();
  return *r;
}

}  // namespace

void register_reward_fn(const std::string& kind, RewardFnFactory factory) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.factories.emplace(kind, std::move(factory)).second) {
    throw Error("reward function kind '" + kind + "' registered twice",
                "register each kind once at startup", ErrorCode::kInternal);
  }
}

std::vector<std::string> reward_fn_kinds() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> out;
  for (const auto& [k, f] : r.factories) out.push_back(k);
  return out;
}

std::unique_ptr<RewardFn> make_reward_fn(ConfigTable& table, std::shared_ptr<const Task> task) {
  std::vector<std::string> kinds = reward_fn_kinds();
  std::string kind = table.choice("reward", "verifier", kinds);
  RewardFnFactory f;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    f = r.factories.at(kind);
  }
  return f(table, std::move(task));
}

}  // namespace moerl::tasks
