// ChatTask: chat-form items are rendered (with the system prompt in front when they have
// none); plain items, rewards, sizes and names pass through.
#include <gtest/gtest.h>

#include "tasks/chat_task.h"

namespace moerl::tasks {
namespace {

// Item 0 is a conversation, item 1 one with its own system message, item 2 a plain prompt.
class TwoForms final : public Task {
 public:
  std::string name() const override { return "two-forms"; }
  TaskItem item(Split split, uint64_t index) const override {
    TaskItem it{"t/" + std::to_string(index), "What is 2+2?", "4"};
    if (index % 3 == 0) it.chat = R"([{"role":"user","content":"What is 2+2?"}])";
    if (index % 3 == 1) it.chat = R"([{"role":"system","content":"Be terse."},{"role":"user","content":"What is 2+2?"}])";
    return it;
  }
  std::optional<uint64_t> size(Split) const override { return 3; }
  double reward(const TaskItem& item, std::string_view completion) const override {
    return completion == item.answer ? 1.0 : 0.0;
  }
  TaskLimits limits() const override { return {12, 1}; }
};

std::string fake_template(const nlohmann::ordered_json& messages) {
  std::string out;
  for (const auto& m : messages) out += "<" + m.at("role").get<std::string>() + ">" + m.at("content").get<std::string>();
  return out + "<assistant>";
}

TEST(ChatTask, RendersConversationsAndLeavesPlainPromptsAlone) {
  auto inner = std::make_shared<TwoForms>();
  ChatTask t(inner, fake_template, ChatOptions{.system_prompt = "Show your work."});
  EXPECT_EQ(t.item(Split::kTrain, 0).prompt, "<system>Show your work.<user>What is 2+2?<assistant>");
  EXPECT_EQ(t.item(Split::kTrain, 1).prompt, "<system>Be terse.<user>What is 2+2?<assistant>");  // its own kept
  EXPECT_EQ(t.item(Split::kTrain, 2).prompt, "What is 2+2?");
  EXPECT_EQ(t.item(Split::kTrain, 0).answer, "4");
  EXPECT_EQ(t.reward(t.item(Split::kTrain, 0), "4"), 1.0);
  EXPECT_EQ(t.reward(t.item(Split::kTrain, 0), "5"), 0.0);
  EXPECT_EQ(t.name(), "two-forms");
  EXPECT_EQ(t.size(Split::kHeldOut), std::optional<uint64_t>(3));
  // The prompt budget grows by what the template and system prompt add to item 0.
  const size_t added = t.item(Split::kTrain, 0).prompt.size() - inner->item(Split::kTrain, 0).prompt.size();
  EXPECT_EQ(t.limits().max_prompt_chars, 12 + added);
  ChatTask no_system(inner, fake_template, ChatOptions{});
  EXPECT_EQ(no_system.item(Split::kTrain, 0).prompt, "<user>What is 2+2?<assistant>");
}

}  // namespace
}  // namespace moerl::tasks
