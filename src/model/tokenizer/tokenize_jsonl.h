// The conversion behind `moerl tokenize`: a JSONL file of texts to a JSONL file of ids, or
// (kDecode) ids back to texts, one output line per input line.
//
//   tokenize_jsonl(*load_tokenizer(dir), "in.jsonl", "out.jsonl", TokenizeDirection::kEncode);
//   // {"text": "Hello"}  ->  {"ids": [9707]}         (no special tokens added)
//   // kDecode: {"ids": [9707]}  ->  {"text": "Hello"} (special tokens kept)
//
// The output is written all or nothing (AtomicFile). A bad line (not JSON, not an object,
// no "text" string / no "ids" list of integers, blank) is a moerl::Error naming the file and
// its 1-based line number; other keys of a line are ignored. Stateless: thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "model/tokenizer.h"

namespace moerl::model {

enum class TokenizeDirection { kEncode, kDecode };

// Returns the number of lines converted.
int64_t tokenize_jsonl(const Tokenizer& tok, const std::string& input, const std::string& output,
                       TokenizeDirection direction);

}  // namespace moerl::model
