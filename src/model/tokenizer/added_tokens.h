// Added tokens of tokenizer.json ("added_tokens"): special and user tokens that are cut out
// of the text before the normalizer and the model run, as tokenizers' AddedVocabulary:
// tokens with "normalized": false are matched on the raw text, the others on the normalized
// text (their content normalized too); among matches the leftmost, then longest, wins;
// "single_word" rejects a match inside a word, "lstrip"/"rstrip" swallow the whitespace
// before/after it; "special" tokens are the ones decode can skip.
//
//   AddedVocabulary added = AddedVocabulary::parse(j["added_tokens"], at, normalizer);
//   std::vector<Segment> segs;
//   added.split(text, Matching::kRaw, segs);   // "a<|im_end|>b" -> "a", #151645, "b"
//
// Immutable after construction: thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/tokenizer/json_util.h"

namespace moerl::model::hf {

class Normalizer;

struct AddedToken {
  int64_t id = -1;
  std::string content;
  bool special = false, lstrip = false, rstrip = false, normalized = true, single_word = false;
};

// A piece of text: plain (id < 0) or the span of one added token.
struct Segment {
  std::string_view text;
  int64_t id = -1;
};

enum class Matching { kRaw, kNormalized };

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  static AddedVocabulary parse(const nlohmann::json& list, const JsonPlace& at, const Normalizer* normalizer);

  // Appends the segments of `text` (valid UTF-8): the added tokens matched by `which` and the
  // plain text between them (empty pieces omitted).
  void split(std::string_view text, Matching which, std::vector<Segment>& out) const;

  const AddedToken* by_id(int64_t id) const;
  std::optional<int64_t> id_of(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // A byte trie over token contents; node 0 is the root.
  struct Trie {
    struct Node {
      std::vector<std::pair<uint8_t, int32_t>> next;  // sorted by byte
      int32_t token = -1;                             // index into tokens_
    };
    std::vector<Node> nodes{1};
    bool first_byte[256] = {};
    void add(std::string_view key, int32_t token);
    // Longest key starting at text[at]: its length, and its token through `token`; 0 if none.
    size_t longest(std::string_view text, size_t at, int32_t& token) const;
  };

  std::vector<AddedToken> tokens_;
  std::unordered_map<std::string, int64_t> id_of_;
  std::unordered_map<int64_t, size_t> index_of_id_;
  Trie raw_, normalized_;
};

}  // namespace moerl::model::hf
