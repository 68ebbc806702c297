// Decoders of tokenizer.json ("decoder"): ByteLevel, Replace, ByteFallback, Fuse, Strip and
// Sequence. Each rewrites the list of token strings in turn (tokenizers' decode_chain); the
// text is the concatenation of the final list.
//
//   std::unique_ptr<Decoder> d = parse_decoder(j["decoder"], at);
//   std::string text = decode_tokens(d.get(), {"Hello", "Ġworld"});   // "Hello world"
//
// Immutable after construction: thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/tokenizer/json_util.h"

namespace moerl::model::hf {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// Null JSON gives nullptr.
std::unique_ptr<Decoder> parse_decoder(const nlohmann::json& j, const JsonPlace& at);

// The decoded text: the chain's output joined, or (no decoder) the tokens joined by spaces,
// as tokenizers does.
std::string decode_tokens(const Decoder* decoder, std::vector<std::string> tokens);

}  // namespace moerl::model::hf
