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
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "model/tokenizer.h"

namespace moerl::model {

enum class TokenizeDirection { kEncode, kDecode };

// Returns the number of lines converted.
int64_t tokenize_jsonl(const Tokenizer& tok, const std::string& input, const std::string& output,
                       TokenizeDirection direction);

// The loop behind tokenize_jsonl and chat_jsonl: each line of `input`, which must be one JSON
// object (else a moerl::Error naming "FILE line N" with `hint`), becomes the line fn(object,
// "FILE line N") returns (no newline); `output` is written all or nothing.
int64_t map_jsonl_objects(const std::string& input, const std::string& output, const std::string& hint,
                          const std::function<std::string(const nlohmann::ordered_json&, const std::string&)>& fn);

}  // namespace moerl::model
