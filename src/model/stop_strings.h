// Stop strings for generation ([rollout] stop = ["</answer>"]): a row ends at the first token
// whose text completes one of the strings. The stop text stays in the response (the token
// that completed it is kept whole), as peers' RL rollouts keep it, so a verifier sees it.
//
//   StopStrings stops(tok, {"</answer>"});
//   gc.stop = stops.hook();   // model::GenerateConfig::stop (null when there are no strings)
//   bool ended = stops.ends_row(tokens);   // tokens so far; true: the last one completed a string
//
// The check decodes only the last tokens (enough to hold the longest string, each token
// being at least one byte), special tokens kept, so it is O(longest string) per token.
// Immutable after construction and thread-safe; the tokenizer must outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/tokenizer.h"

namespace moerl::model {

class StopStrings {
 public:
  // Throws moerl::Error for an empty string (it would stop every row at once).
  StopStrings(const Tokenizer& tokenizer, std::vector<std::string> strings);

  bool empty() const { return strings_.empty(); }
  const std::vector<std::string>& strings() const { return strings_; }
  // True when the text of `tokens` contains a stop string that its last token completed.
  bool ends_row(const std::vector<int64_t>& tokens) const;
  // A GenerateConfig::stop hook over this object (empty function when there are no strings).
  std::function<bool(const std::vector<int64_t>&)> hook() const;

 private:
  const Tokenizer& tok_;
  std::vector<std::string> strings_;
  size_t window_ = 0;  // tokens decoded per check
};

}  // namespace moerl::model
