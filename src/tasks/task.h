// Task interface: a seeded prompt source with train and held-out splits, plus a verifier
// that turns a completion into a reward. Built-in tasks are generators (addition, sort,
// reverse, copy, countdown); JSONL files are datasets. No dependency on the model.
//
//   std::unique_ptr<Task> task = make_task(doc.root().table("task"));   // registry.h
//   TaskItem it = task->item(Split::kTrain, step * batch + i);   // same (seed, index) -> same item
//   double r = task->reward(it, completion);                      // in [0, 1], cheap, deterministic
// Tasks are immutable after construction: every const method is thread-safe.
// Failure: bad config or data -> moerl::Error naming the key/file and a HINT.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moerl::tasks {

enum class Split { kTrain, kHeldOut };
const char* split_name(Split split);

struct TaskItem {
  std::string id;      // stable name, e.g. "addition/train/17" or "data.jsonl:12"
  std::string prompt;  // what the policy sees
  std::string answer;  // one reference answer (verifiers may accept others)
  // The SFT target when the task's demonstrations come from an imperfect teacher (addition's
  // teacher_carry_error); empty: the reference answer.
  std::string demonstration;
  // Chat form (JSONL tasks): the conversation up to the answer, a JSON array of
  // {"role", "content"} objects, which ChatTask (tasks/chat_task.h) renders into `prompt`
  // through the model's chat template; empty for a plain prompt.
  std::string chat;

  const std::string& sft_target() const { return demonstration.empty() ? answer : demonstration; }
};

struct TaskLimits {
  size_t max_prompt_chars = 0;  // longest prompt the task can produce
  size_t max_answer_chars = 0;  // longest reference answer (a generation budget hint)
};

class Task {
 public:
  virtual ~Task() = default;
  virtual std::string name() const = 0;
  // Deterministic in (seed, split, index); never the same prompt in both splits.
  virtual TaskItem item(Split split, uint64_t index) const = 0;
  // Distinct items in a split for finite datasets; nullopt for generators.
  virtual std::optional<uint64_t> size(Split split) const { return std::nullopt; }
  // Reward of a completion (the generated text after the prompt, stop token removed).
  // Rewards lie in [0, 1]: 1 = correct, format_reward = well-formed but wrong, 0 otherwise.
  virtual double reward(const TaskItem& item, std::string_view completion) const = 0;
  virtual TaskLimits limits() const = 0;
  // True when the items must be rendered through a chat template (a JSONL file with
  // "messages" lines, or [task] chat_template = true): a tokenizer without one is an error.
  virtual bool needs_chat_template() const { return false; }

  // items(split, first, count)[i] == item(split, first + i).
  std::vector<TaskItem> items(Split split, uint64_t first, uint64_t count) const;
};

// Settings every task reads from [task]: seed, held_out_fraction, format_reward.
struct TaskCommon {
  uint64_t seed = 0;
  double held_out_fraction = 0.1;  // share of the problem space reserved for held-out
  double format_reward = 0.0;      // reward for a well-formed but wrong answer, in [0, 0.5]
};

// The text a verifier judges: the completion up to its first '\n', without leading and
// trailing spaces/tabs/CR.
std::string_view answer_text(std::string_view completion);

// 64-bit FNV-1a of `s`, finalised with a SplitMix64 step (stable across platforms).
uint64_t stable_hash(std::string_view s);

// Held-out membership of a problem, a property of its prompt alone (seed-independent).
bool is_held_out(std::string_view prompt, double held_out_fraction);

// SplitMix64 stream keyed by a few integers; deterministic and platform-independent.
class Rng {
 public:
  Rng(std::initializer_list<uint64_t> key);
  uint64_t next();
  uint64_t below(uint64_t n);                // uniform in [0, n), n > 0
  int64_t uniform(int64_t lo, int64_t hi);   // uniform in [lo, hi]

 private:
  uint64_t state_ = 0;
};

// Bijection of [0, n) keyed by `key` (Feistel network with cycle walking): a seeded
// shuffle that needs no table.
uint64_t permute_index(uint64_t index, uint64_t n, uint64_t key);

}  // namespace moerl::tasks
