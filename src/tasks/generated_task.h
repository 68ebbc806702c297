// GeneratedTask: base of the built-in synthetic tasks. A subclass draws one problem from
// an Rng and scores an answer; the base turns that into a seeded, split-aware prompt
// source: item(split, i) draws candidates from Rng{seed, split, i, attempt} until one falls
// in the requested split (held-out membership = is_held_out(prompt)).
// Immutable after construction; thread-safe.
#pragma once

#include <string>

#include "tasks/task.h"

namespace moerl::tasks {

struct Problem {
  std::string prompt;
  std::string answer;
  std::string demonstration;  // TaskItem::demonstration
};

class GeneratedTask : public Task {
 public:
  GeneratedTask(std::string name, TaskCommon common);
  std::string name() const override { return name_; }
  TaskItem item(Split split, uint64_t index) const override;
  double reward(const TaskItem& item, std::string_view completion) const override;

 protected:
  virtual Problem generate(Rng& rng) const = 0;
  // 1 for a correct answer, format_reward() when well_formed(), else 0.
  virtual bool correct(const TaskItem& item, std::string_view answer) const;
  virtual bool well_formed(const TaskItem& item, std::string_view answer) const = 0;
  // Throws moerl::Error if a held-out or train problem cannot be found: called by
  // subclasses at the end of their constructor, so a too-small problem space fails early.
  void check_splits() const;
  double format_reward() const { return common_.format_reward; }

 private:
  std::string name_;
  TaskCommon common_;
};

}  // namespace moerl::tasks
