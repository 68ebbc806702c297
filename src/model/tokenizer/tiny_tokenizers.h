// Hand-made tokenizer.json files for the unit tests, small enough to work out every id by
// hand: a byte-level BPE with 10 merges (GPT-2 style) and a SentencePiece-style BPE with byte
// fallback (Llama-2 style). Tests change fields of the JSON before writing it.
#pragma once

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "model/tokenizer/byte_level.h"

namespace moerl::model::testing {

// Byte-level vocabulary: byte b has id b (as its byte-level character), then the merged tokens
//   256 ll, 257 he, 258 hell, 259 hello, 260 Ġw, 261 or, 262 Ġwor, 263 Ġworl, 264 Ġworld, 265 ĠĠ
// in that rank order. Pre-tokenizer: ByteLevel with the GPT-2 split; decoder: ByteLevel.
inline nlohmann::json tiny_byte_level_json() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[hf::byte_level_char(static_cast<uint8_t>(b))] = b;
  const char* merges[] = {"l l", "h e", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "Ġwor l", "Ġworl d", "Ġ Ġ"};
  int id = 256;
  nlohmann::json list = nlohmann::json::array();
  for (const char* m : merges) {
    std::string s = m;
    const size_t sp = s.find(' ');
    vocab[s.substr(0, sp) + s.substr(sp + 1)] = id++;
    list.push_back(s);
  }
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", nlohmann::json::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
      {"post_processor", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
        {"vocab", vocab}, {"merges", list}}},
  };
}

// SentencePiece-style vocabulary: 0 <unk>, 1 <s>, 2 </s>, 3.. <0x00>..<0xFF> (byte b at 3 + b),
// 259 ▁, 260 h, 261 i, 262 ▁h, 263 ▁hi, 264 e; merges "▁ h", "▁h i". Normalizer Prepend("▁") +
// Replace(" ", "▁"), no pre-tokenizer, byte fallback, fuse_unk; decoder Replace, ByteFallback,
// Fuse, Strip; post-processor adds <s>.
inline nlohmann::json tiny_sentencepiece_json() {
  nlohmann::json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  vocab["▁"] = 259;
  vocab["h"] = 260;
  vocab["i"] = 261;
  vocab["▁h"] = 262;
  vocab["▁hi"] = 263;
  vocab["e"] = 264;
  const auto special = [](int id, const char* content) {
    return nlohmann::json{{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false},
                          {"rstrip", false}, {"normalized", false}, {"special", true}};
  };
  return {
      {"version", "1.0"},
      {"added_tokens", {special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", "▁"}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}}},
      {"pre_tokenizer", nullptr},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair", nlohmann::json::array()},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
          {{"type", "ByteFallback"}},
          {{"type", "Fuse"}},
          {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", "<unk>"}, {"fuse_unk", true}, {"byte_fallback", true},
        {"vocab", vocab},
        {"merges", nlohmann::json::array({nlohmann::json::array({"▁", "h"}), nlohmann::json::array({"▁h", "i"})})}}},
  };
}

}  // namespace moerl::model::testing
