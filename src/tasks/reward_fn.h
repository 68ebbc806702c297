// RewardFn: how the trainer turns (item, completion) pairs into rewards. A task's rule-based
// verifier (built in, kind "verifier"), a remote service (built in, kind "http":
// tasks/http_reward.h), or a plug-in such as a scoring model
// (a moerl checkpoint with a value head), registered at startup by the part that owns the
// model: tasks/ must not depend on the model.
//
//   register_reward_fn("model", [](ConfigTable& t, std::shared_ptr<const Task> task) {
//     return std::make_unique<ModelRewardFn>(t.required_string("reward_model"), task); });
//   std::unique_ptr<RewardFn> fn = make_reward_fn(task_table, task);   // reads key "reward"
//   std::vector<double> r = fn->score(items, completions);
// The registry is guarded by a mutex. NOTE: register from code that is certainly linked
// (e.g. the trainer's setup); static registrar objects in static libraries can be dropped.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/config.h"
#include "tasks/task.h"

namespace moerl::tasks {

struct RewardRange {
  double min = 0.0;
  double max = 1.0;
};

class RewardFn {
 public:
  virtual ~RewardFn() = default;
  virtual std::string name() const = 0;
  // One reward per pair, in order. items.size() must equal completions.size().
  // Thread-safety is the implementation's to state; VerifierRewardFn is thread-safe.
  virtual std::vector<double> score(const std::vector<TaskItem>& items,
                                    const std::vector<std::string>& completions) = 0;
  // Where rewards lie (documented per implementation).
  virtual RewardRange range() const { return {}; }
  // Named sub-scores the reward reported (e.g. a service's extra_logs), each averaged over the
  // items scored since the last call; empty for kinds that report none.
  virtual std::map<std::string, double> drain_extra_logs() { return {}; }
};

// The task's own verifier: rewards in [0, 1], deterministic, thread-safe.
class VerifierRewardFn : public RewardFn {
 public:
  explicit VerifierRewardFn(std::shared_ptr<const Task> task);
  std::string name() const override { return "verifier"; }
  std::vector<double> score(const std::vector<TaskItem>& items,
                            const std::vector<std::string>& completions) override;

 private:
  std::shared_ptr<const Task> task_;
};

// Adapter for scoring models: reward = squash(scorer(prompt + completion)). The plug-in
// that owns the model supplies `scorer` (one score per text, batched); squash kNone keeps
// raw scores (range unbounded), kSigmoid maps them into (0, 1).
// Thread-safety: as the scorer's.
enum class Squash { kNone, kSigmoid };

class TextScorerRewardFn : public RewardFn {
 public:
  using Scorer = std::function<std::vector<double>(const std::vector<std::string>& texts)>;
  TextScorerRewardFn(std::string name, Scorer scorer, Squash squash);
  std::string name() const override { return name_; }
  std::vector<double> score(const std::vector<TaskItem>& items,
                            const std::vector<std::string>& completions) override;
  RewardRange range() const override;

 private:
  std::string name_;
  Scorer scorer_;
  Squash squash_;
};

using RewardFnFactory =
    std::function<std::unique_ptr<RewardFn>(ConfigTable& table, std::shared_ptr<const Task> task)>;

// Adds a kind; throws moerl::Error(kInternal) if the kind is already registered.
void register_reward_fn(const std::string& kind, RewardFnFactory factory);
std::vector<std::string> reward_fn_kinds();
// Reads `reward` (default "verifier") from the table (normally [task]) and builds that kind;
// an unknown kind -> moerl::Error listing the registered ones. Does not call done().
std::unique_ptr<RewardFn> make_reward_fn(ConfigTable& table, std::shared_ptr<const Task> task);

}  // namespace moerl::tasks
