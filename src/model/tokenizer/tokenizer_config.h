// What a Hugging Face model directory says about its tokenizer besides tokenizer.json:
// tokenizer_config.json (bos/eos/pad/unk tokens as strings or AddedToken objects with a
// "content", add_bos_token/add_eos_token, chat_template as a string or a list of {name, template}) and
// generation_config.json (eos_token_id as an int or a list, bos/pad_token_id), plus
// chat_template.jinja, where transformers 5 saves the template. Every file is optional.
//
//   TokenizerConfig c = read_tokenizer_config("/models/Qwen3-30B-A3B");
//   c.eos_token;             // "<|im_end|>"
//   c.generation_eos_ids;    // {151645, 151643}
//
// A plain value; reading throws moerl::Error naming the file and field of a bad value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moerl::model::hf {

struct TokenizerConfig {
  std::optional<std::string> bos_token, eos_token, pad_token;  // token contents; absent or null: none
  std::optional<bool> add_bos_token, add_eos_token;
  std::string chat_template;  // "" when there is none
  std::vector<int64_t> generation_eos_ids;
  std::optional<int64_t> generation_bos_id, generation_pad_id;
};

TokenizerConfig read_tokenizer_config(const std::string& dir);

}  // namespace moerl::model::hf
