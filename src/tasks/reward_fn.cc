// Verifier-backed RewardFn and the reward-function registry.
#include "tasks/reward_fn.h"

#include <map>
#include <mutex>

#include "base/check.h"
#include "base/error.h"

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
