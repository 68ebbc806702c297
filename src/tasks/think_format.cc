// Reasoning-block format check: one <think> ... </think>, the answer judged after it.
#include "tasks/think_format.h"

namespace moerl::tasks {

namespace {

constexpr std::string_view kOpen = "<think>", kClose = "</think>";

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

size_t count(std::string_view s, std::string_view tag) {
  size_t n = 0;
  for (size_t pos = s.find(tag); pos != std::string_view::npos; pos = s.find(tag, pos + tag.size())) ++n;
  return n;
}

bool prompt_opens_block(std::string_view prompt) {
  while (!prompt.empty() && is_space(prompt.back())) prompt.remove_suffix(1);
  return prompt.ends_with(kOpen);
}

}  // namespace

const char* name_of(ThinkMode mode) {
  switch (mode) {
    case ThinkMode::kOff: return "off";
    case ThinkMode::kOptional: return "optional";
    case ThinkMode::kRequired: return "required";
  }
  return "?";
}

std::optional<std::string_view> judged_text(std::string_view prompt, std::string_view completion, ThinkMode mode) {
  if (mode == ThinkMode::kOff) return completion;
  bool opened = prompt_opens_block(prompt);
  size_t opens = count(completion, kOpen), closes = count(completion, kClose);
  if (mode == ThinkMode::kOptional && !opened && opens == 0 && closes == 0) return completion;
  if (closes != 1 || opens != (opened ? 0u : 1u)) return std::nullopt;
  size_t close = completion.find(kClose);
  if (!opened) {
    size_t open = completion.find(kOpen);
    if (open > close) return std::nullopt;
    for (size_t i = 0; i < open; ++i) {
      if (!is_space(completion[i])) return std::nullopt;
    }
  }
  std::string_view rest = completion.substr(close + kClose.size());
  while (!rest.empty() && is_space(rest.front())) rest.remove_prefix(1);
  return rest;
}

}  // namespace moerl::tasks
