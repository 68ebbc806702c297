// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): Split (literal or regex pattern, every
// delimiter behaviour, invert), ByteLevel (add_prefix_space, use_regex = the GPT-2 pattern)
// and Sequence. They cut one text segment into the pieces ("words") the BPE model encodes.
//
//   std::unique_ptr<PreTokenizer> p = parse_pre_tokenizer(j["pre_tokenizer"], at);
//   Pieces pieces;
//   pieces.items = {"Hello world"};
//   p->pre_tokenize(pieces);                 // Qwen3: "Hello", "Ġworld"
//
// Immutable after construction: thread-safe (Pieces belong to the caller).
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/tokenizer/json_util.h"

namespace moerl::model::hf {

// The pieces of one segment, in order. Views point into the caller's text or into
// `storage`, which holds the pieces a pre-tokenizer rewrote (stable addresses).
struct Pieces {
  std::vector<std::string_view> items;
  std::deque<std::string> storage;
  std::string_view keep(std::string s) {
    storage.push_back(std::move(s));
    return storage.back();
  }
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces every piece by its parts; empty parts are dropped.
  virtual void pre_tokenize(Pieces& pieces) const = 0;
};

// Null JSON gives nullptr (the whole segment is one piece).
std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const nlohmann::json& j, const JsonPlace& at);

// When the last step of `p` maps bytes to the byte-level alphabet (a ByteLevel, alone or
// last in a Sequence), returns `p` with that mapping switched off and sets `byte_level`:
// the BPE model then maps bytes itself (bpe.h), which avoids building mapped strings.
// Otherwise returns `p` unchanged and clears `byte_level`.
std::unique_ptr<PreTokenizer> defer_byte_mapping(std::unique_ptr<PreTokenizer> p, bool& byte_level);

}  // namespace moerl::model::hf
