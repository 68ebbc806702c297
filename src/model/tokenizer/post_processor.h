// The part of tokenizer.json's "post_processor" that encode(text, add_bos=true) needs: the
// special tokens a single sequence gets before and after it. TemplateProcessing (its
// "single" template; Llama-2 puts <s> first), ByteLevel (offsets only: nothing added) and
// Sequence of those are read; other types are an Error naming the type.
//
//   SpecialTokensAround s = parse_post_processor(j["post_processor"], at);   // Llama-2: {1}, {}
//
// A plain value: thread-safe to share.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/tokenizer/json_util.h"

namespace moerl::model::hf {

struct SpecialTokensAround {
  std::vector<int64_t> before, after;
};

// Null JSON gives no tokens.
SpecialTokensAround parse_post_processor(const nlohmann::json& j, const JsonPlace& at);

}  // namespace moerl::model::hf
