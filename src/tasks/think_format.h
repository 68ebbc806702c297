// The reasoning-block format of reasoning models (`<think> ... </think>` then the answer):
// checks it and cuts off the block, so that a verifier judges only the text after it.
// It does not score the reasoning itself.
//
//   ThinkMode m = ThinkMode::kRequired;                       // [task] think = "required"
//   std::optional<std::string_view> t = judged_text(item.prompt, completion, m);
//   double r = t ? verify(kind, *t, item.answer, options) : 0.0;   // nullopt: format broken
// Rules (kRequired; kOptional applies them only when a tag appears or the prompt opens
// the block; kOff returns the completion unchanged):
//   - exactly one `<think>` and one `</think>`, in that order; only whitespace before
//     `<think>`. A prompt whose text ends in `<think>` (chat templates such as
//     DeepSeek-R1's and Qwen3's open the block in the prompt) counts as that opening tag,
//     and then the completion must hold no `<think>` of its own.
//   - the judged text is what follows `</think>`, leading whitespace and newlines removed
//     (so first-line verifiers see the answer line).
//   - unclosed, repeated or misordered tags: nullopt (reward 0, never format_reward).
// Pure function; thread-safe.
#pragma once

#include <optional>
#include <string_view>

namespace moerl::tasks {

enum class ThinkMode { kOff, kOptional, kRequired };
const char* name_of(ThinkMode mode);

// The part of `completion` to judge, or nullopt when it breaks the format.
std::optional<std::string_view> judged_text(std::string_view prompt, std::string_view completion, ThinkMode mode);

}  // namespace moerl::tasks
