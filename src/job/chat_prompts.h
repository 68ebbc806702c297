// The task as the policy sees it: chat-form items (tasks::TaskItem::chat) rendered through
// the tokenizer's chat template when [task] chat_template is on (by default: when the
// tokenizer has a template), with the generation prompt, [task] system_prompt and template
// variables ([task] enable_thinking, for Qwen3). Every process that turns task items into
// prompts (the sync job, the async trainer's controller, SFT, eval, `moerl task`) goes
// through it, so they all render alike.
//
//   ChatSection chat = read_chat_section(task_table);      // before tasks::make_task(task_table)
//   auto t = task_for_tokenizer(task, chat, *tok, "the tokenizer in models/qwen3");
//   t->item(tasks::Split::kTrain, 0).prompt;   // "<|im_start|>user\n...<|im_start|>assistant\n"
//
// Errors (moerl::Error naming the key and the tokenizer): chat_template = true with a
// tokenizer that has no template; a dataset of "messages" lines with the template off.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/config.h"
#include "model/tokenizer.h"
#include "tasks/chat_task.h"

namespace moerl::job {

struct ChatSection {
  std::optional<bool> enabled;  // [task] chat_template; unset: when the tokenizer has a template
  tasks::ChatOptions options;   // [task] system_prompt
  nlohmann::ordered_json variables = nlohmann::ordered_json::object();  // [task] enable_thinking
};

// Reads chat_template, system_prompt and enable_thinking from [task].
ChatSection read_chat_section(ConfigTable& task);

// `task` itself when the template is off (or its items have no conversations to render).
std::shared_ptr<const tasks::Task> task_for_tokenizer(std::shared_ptr<const tasks::Task> task, const ChatSection& chat,
                                                      const model::Tokenizer& tok, const std::string& tokenizer_source);

}  // namespace moerl::job
