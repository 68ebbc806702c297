#include "job/chat_prompts.h"

#include "base/error.h"
#include "base/log.h"
#include "model/tokenizer/chat_template.h"

namespace moerl::job {

ChatSection read_chat_section(ConfigTable& task) {
  ChatSection c;
  if (task.has("chat_template")) c.enabled = task.boolean("chat_template", true);
  c.options.system_prompt = task.string("system_prompt", "");
  if (task.has("enable_thinking")) c.variables["enable_thinking"] = task.boolean("enable_thinking", true);
  return c;
}

std::shared_ptr<const tasks::Task> task_for_tokenizer(std::shared_ptr<const tasks::Task> task, const ChatSection& chat,
                                                      const model::Tokenizer& tok, const std::string& tokenizer_source) {
  const model::Tokenizer::ChatTemplateInfo info = tok.chat_template();
  const bool has_template = !info.template_text.empty();
  const bool enabled = chat.enabled.value_or(has_template);
  if (enabled && !has_template) {
    throw Error("config: task.chat_template = true but " + tokenizer_source + " has no chat template",
                "use a model directory whose tokenizer_config.json has a chat_template (or chat_template.jinja), "
                "or set task.chat_template = false to train on the plain prompts");
  }
  if (!enabled) {
    if (task->needs_chat_template()) {
      throw Error("config: task " + task->name() + " holds chat conversations (\"messages\" lines) but the chat "
                      "template is off (" + (has_template ? "task.chat_template = false" : tokenizer_source + " has none") + ")",
                  "conversations are rendered through the model's chat template: use a model directory with one, "
                  "or write the dataset as {\"prompt\", \"answer\"} lines");
    }
    return task;
  }
  // Parsed once (a template error names its line here, at startup); rendering is thread-safe.
  auto tpl = std::make_shared<const model::ChatTemplate>(info, tokenizer_source);
  const nlohmann::ordered_json variables = chat.variables;
  tasks::ChatRenderer render = [tpl, variables](const nlohmann::ordered_json& messages) {
    return tpl->render(messages, /*add_generation_prompt=*/true, variables);
  };
  MOERL_LOG(INFO) << "task: chat-form prompts rendered through the chat template of " << tokenizer_source
                  << (chat.options.system_prompt.empty() ? "" : ", with a system prompt");
  return std::make_shared<tasks::ChatTask>(std::move(task), std::move(render), chat.options);
}

}  // namespace moerl::job
