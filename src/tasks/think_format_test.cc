// Reasoning-block format: required, optional and off, with the block opened by the
// completion or by the prompt (chat templates that end the prompt in <think>).
#include "tasks/think_format.h"

#include <gtest/gtest.h>

namespace moerl::tasks {
namespace {

constexpr auto kOff = ThinkMode::kOff, kOpt = ThinkMode::kOptional, kReq = ThinkMode::kRequired;

struct Case {
  const char* prompt;
  const char* completion;
  ThinkMode mode;
  const char* want;  // nullptr: format broken
};

const Case kCases[] = {
    {"Q:", "<think>hmm</think>\n\n42\n", kReq, "42\n"},
    {"Q:", "  \n<think>a\nb</think> 42", kReq, "42"},
    {"Q:", "42", kReq, nullptr},                                   // no block
    {"Q:", "<think>never closed 42", kReq, nullptr},               // unclosed
    {"Q:", "</think>42", kReq, nullptr},                           // close without open
    {"Q:", "</think><think>x42", kReq, nullptr},                   // misordered
    {"Q:", "<think>a</think>b<think>c</think>42", kReq, nullptr},  // twice
    {"Q:", "Sure. <think>a</think>42", kReq, nullptr},             // text before the block
    {"Q: <think>\n", "reasoning</think>42", kReq, "42"},           // the prompt opened it
    {"Q: <think>\n", "<think>again</think>42", kReq, nullptr},     // opened twice
    {"Q: <think>\n", "reasoning 42", kReq, nullptr},               // never closed
    {"Q:", "42", kOpt, "42"},
    {"Q:", "<think>a</think>42", kOpt, "42"},
    {"Q:", "<think>unclosed 42", kOpt, nullptr},
    {"Q:", "42</think>", kOpt, nullptr},
    {"Q: <think>", "a</think>42", kOpt, "42"},
    {"Q: <think>", "a 42", kOpt, nullptr},
    {"Q:", "<think>broken 42", kOff, "<think>broken 42"},
};

TEST(ThinkFormat, Table) {
  for (const Case& c : kCases) {
    std::optional<std::string_view> got = judged_text(c.prompt, c.completion, c.mode);
    if (c.want == nullptr) {
      EXPECT_FALSE(got.has_value()) << name_of(c.mode) << " [" << c.prompt << "][" << c.completion << "] -> ["
                                    << got.value_or("") << "]";
    } else {
      EXPECT_EQ(got, std::optional<std::string_view>(c.want)) << name_of(c.mode) << " [" << c.completion << "]";
    }
  }
}

}  // namespace
}  // namespace moerl::tasks
