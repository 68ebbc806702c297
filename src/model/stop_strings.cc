#include "model/stop_strings.h"

#include <algorithm>

#include "base/error.h"

namespace moerl::model {

StopStrings::StopStrings(const Tokenizer& tokenizer, std::vector<std::string> strings)
    : tok_(tokenizer), strings_(std::move(strings)) {
  size_t longest = 0;
  for (size_t i = 0; i < strings_.size(); ++i) {
    if (strings_[i].empty()) {
      throw Error("stop string " + std::to_string(i) + " is empty",
                  "an empty stop string would end every row at its first token; remove it from rollout.stop");
    }
    longest = std::max(longest, strings_[i].size());
  }
  // A string of n bytes lies within the last n tokens that contain its end (a token is at
  // least one byte); one more lets a multi-byte character cut at the window's start decode.
  window_ = longest + 1;
}

bool StopStrings::ends_row(const std::vector<int64_t>& tokens) const {
  if (strings_.empty() || tokens.empty()) return false;
  const size_t n = std::min(window_, tokens.size());
  const std::vector<int64_t> tail(tokens.end() - static_cast<std::ptrdiff_t>(n), tokens.end());
  const std::string with_last = tok_.decode(tail, SpecialTokens::kKeep);
  const std::vector<int64_t> before(tail.begin(), tail.end() - 1);
  const std::string without_last = before.empty() ? std::string() : tok_.decode(before, SpecialTokens::kKeep);
  for (const std::string& s : strings_) {
    // Completed by the last token: present now, absent from the text before it.
    if (with_last.find(s) != std::string::npos && without_last.find(s) == std::string::npos) return true;
  }
  return false;
}

std::function<bool(const std::vector<int64_t>&)> StopStrings::hook() const {
  if (strings_.empty()) return {};
  return [this](const std::vector<int64_t>& tokens) { return ends_row(tokens); };
}

}  // namespace moerl::model
