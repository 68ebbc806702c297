// Task registry: builds a Task from the [task] section of a job config.
//
//   ConfigTable t = doc.root().table("task");
//   std::shared_ptr<const Task> task = make_task(t);   // reads name, seed, ... and task keys
//   auto reward = make_reward_fn(t, task);             // reward_fn.h
//   t.done();                                          // the caller rejects unknown keys
// Built-in names: addition, sort, reverse, copy, countdown, jsonl. The registry is guarded
// by a mutex; errors are moerl::Error naming the key and the accepted values.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/config.h"
#include "tasks/task.h"

namespace moerl::tasks {

using TaskFactory = std::function<std::unique_ptr<Task>(ConfigTable& table, const TaskCommon& common)>;

// Adds a task name; throws moerl::Error(kInternal) if it exists.
void register_task(const std::string& name, TaskFactory factory);
std::vector<std::string> task_names();

// Reads the common keys (seed, held_out_fraction, format_reward) and `name`'s own keys.
// Does not call table.done().
std::unique_ptr<Task> make_task(const std::string& name, ConfigTable& table);
// Same, with the name read from the required key `name`.
std::unique_ptr<Task> make_task(ConfigTable& table);

TaskCommon read_task_common(ConfigTable& table);

}  // namespace moerl::tasks
