#include "tasks/chat_task.h"

#include "base/error.h"

namespace moerl::tasks {

ChatTask::ChatTask(std::shared_ptr<const Task> inner, ChatRenderer render, ChatOptions options)
    : inner_(std::move(inner)), render_(std::move(render)), options_(std::move(options)) {
  const std::optional<uint64_t> n = inner_->size(Split::kTrain);
  if (n && *n == 0) return;
  const TaskItem first = inner_->item(Split::kTrain, 0);
  if (!first.chat.empty()) {  // the role markers (and a system prompt) around the content
    const std::string rendered = render_(messages(first));
    template_chars_ = rendered.size() > first.prompt.size() ? rendered.size() - first.prompt.size() : 0;
  }
}

nlohmann::ordered_json ChatTask::messages(const TaskItem& item) const {
  nlohmann::ordered_json m;
  try {
    m = nlohmann::ordered_json::parse(item.chat);
  } catch (const nlohmann::json::exception& e) {
    throw Error("task item " + item.id + ": its conversation is not JSON (" + e.what() + ")",
                "this is a bug in the task that made it; TaskItem::chat holds a JSON array of messages");
  }
  const bool has_system = !m.empty() && m.front().value("role", "") == "system";
  if (!options_.system_prompt.empty() && !has_system) {
    m.insert(m.begin(), nlohmann::ordered_json{{"role", "system"}, {"content", options_.system_prompt}});
  }
  return m;
}

TaskItem ChatTask::item(Split split, uint64_t index) const {
  TaskItem it = inner_->item(split, index);
  if (!it.chat.empty()) it.prompt = render_(messages(it));
  return it;
}

TaskLimits ChatTask::limits() const {
  TaskLimits l = inner_->limits();
  l.max_prompt_chars += template_chars_;
  return l;
}

}  // namespace moerl::tasks
