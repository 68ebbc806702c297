// ChatTask: a task whose chat-form items (TaskItem::chat) are rendered through the model's
// chat template before anyone sees them, so rollout, SFT, eval and rewards all get the
// prompt as the policy reads it. Items without a conversation pass through unchanged.
//
//   auto render = [&](const nlohmann::ordered_json& messages) { return render_chat(info, messages, true, {}); };
//   std::shared_ptr<const Task> t = std::make_shared<ChatTask>(inner, render, ChatOptions{.system_prompt = "..."});
//   t->item(Split::kTrain, 3).prompt;   // "<|im_start|>system\n...<|im_start|>assistant\n"
//
// The render function is the tokenizer side (model/tokenizer/chat_template.h); this library
// stays free of the model. Thread-safe when `render` is.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "tasks/task.h"

namespace moerl::tasks {

struct ChatOptions {
  // Added as the first message when the conversation has no system message; "" adds none.
  std::string system_prompt;
};

// Renders a conversation (with the generation prompt) into the text the policy continues.
using ChatRenderer = std::function<std::string(const nlohmann::ordered_json& messages)>;

class ChatTask final : public Task {
 public:
  ChatTask(std::shared_ptr<const Task> inner, ChatRenderer render, ChatOptions options);

  std::string name() const override { return inner_->name(); }
  TaskItem item(Split split, uint64_t index) const override;
  std::optional<uint64_t> size(Split split) const override { return inner_->size(split); }
  double reward(const TaskItem& item, std::string_view completion) const override {
    return inner_->reward(item, completion);
  }
  TaskLimits limits() const override;
  bool needs_chat_template() const override { return inner_->needs_chat_template(); }

  // The messages of `item` as rendered: its conversation with the system prompt in front.
  nlohmann::ordered_json messages(const TaskItem& item) const;

 private:
  std::shared_ptr<const Task> inner_;
  ChatRenderer render_;
  ChatOptions options_;
  size_t template_chars_ = 0;  // what rendering adds to a prompt, measured on train item 0
};

}  // namespace moerl::tasks
