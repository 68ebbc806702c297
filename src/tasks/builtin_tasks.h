// Factories of the built-in generated tasks; each reads its own keys from [task]
// (see docs/rl.md, "Tasks") and throws moerl::Error naming a bad key. Used by registry.cc.
//
//   auto t = make_addition_task(task_table, common);   // "12+34=" -> "46"
#pragma once

#include <memory>

#include "base/config.h"
#include "tasks/task.h"

namespace moerl::tasks {

std::unique_ptr<Task> make_addition_task(ConfigTable& table, const TaskCommon& common);
std::unique_ptr<Task> make_sort_task(ConfigTable& table, const TaskCommon& common);
std::unique_ptr<Task> make_reverse_task(ConfigTable& table, const TaskCommon& common);
std::unique_ptr<Task> make_copy_task(ConfigTable& table, const TaskCommon& common);
std::unique_ptr<Task> make_countdown_task(ConfigTable& table, const TaskCommon& common);

}  // namespace moerl::tasks
