// Registry of task factories, pre-filled with the built-in tasks.
#include "tasks/registry.h"

#include <map>
#include <mutex>

#include "base/error.h"
#include "tasks/builtin_tasks.h"
#include "tasks/jsonl_task.h"

namespace moerl::tasks {

namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, TaskFactory> factories;  // guarded by mu
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;
    reg->factories = {{"addition", make_addition_task}, {"sort", make_sort_task},
                      {"reverse", make_reverse_task},   {"copy", make_copy_task},
                      {"countdown", make_countdown_task}, {"jsonl", make_jsonl_task}};
    return reg;
  }();
  return *r;
}

}  // namespace

void register_task(const std::string& name, TaskFactory factory) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.factories.emplace(name, std::move(factory)).second) {
    throw Error("task '" + name + "' registered twice", "register each task once", ErrorCode::kInternal);
  }
}

std::vector<std::string> task_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> out;
  for (const auto& [k, f] : r.factories) out.push_back(k);
  return out;
}

TaskCommon read_task_common(ConfigTable& t) {
  TaskCommon c;
  c.seed = static_cast<uint64_t>(t.integer("seed", 0, {.min = 0, .max = 9.2e18}));
  c.held_out_fraction = t.number("held_out_fraction", c.held_out_fraction, {.min = 0, .max = 0.9});
  c.format_reward = t.number("format_reward", c.format_reward, {.min = 0, .max = 0.5});
  return c;
}

std::unique_ptr<Task> make_task(const std::string& name, ConfigTable& table) {
  TaskFactory f;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.factories.find(name);
    if (it != r.factories.end()) f = it->second;
  }
  if (!f) {
    std::string names;
    for (const auto& n : task_names()) names += (names.empty() ? "" : ", ") + n;
    throw Error("config: " + table.path() + ".name = \"" + name + "\" is not a task",
                "accepted values: " + names);
  }
  TaskCommon common = read_task_common(table);
  return f(table, common);
}

std::unique_ptr<Task> make_task(ConfigTable& table) {
  return make_task(table.required_string("name"), table);
}

}  // namespace moerl::tasks
