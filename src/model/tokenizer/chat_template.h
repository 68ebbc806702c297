// A tokenizer's chat template rendered as transformers' apply_chat_template(tokenize=False)
// does, with moerl's Jinja interpreter (model/jinja). The template sees `messages`,
// `add_generation_prompt`, `tools` and `documents` (None), the tokenizer's bos/eos/pad
// tokens where it has them, and the extra variables (e.g. {"enable_thinking": false}).
//
//   const Tokenizer::ChatTemplateInfo info = tok->chat_template();
//   std::string text = render_chat(info, messages, /*add_generation_prompt=*/true, {{"enable_thinking", false}});
//   std::vector<int64_t> ids = tok->encode(text, /*add_bos=*/false);
//
//   chat_jsonl(*tok, "/models/Qwen3", "in.jsonl", "out.jsonl");   // `moerl chat`
//
// Errors are moerl::Error: a tokenizer without a template, a template moerl cannot parse
// (naming line and column), a render failure such as the template's raise_exception.
// ChatTemplate is immutable after construction; render is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "model/jinja/template.h"
#include "model/tokenizer.h"

namespace moerl::model {

class ChatTemplate {
 public:
  // `source` names where the template came from, for the no-template error (a model dir).
  explicit ChatTemplate(const Tokenizer::ChatTemplateInfo& info, const std::string& source = "");
  // messages: a JSON list of {"role", "content", ...}; extra_vars: a JSON object (or null).
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                     const nlohmann::ordered_json& extra_vars) const;

 private:
  Tokenizer::ChatTemplateInfo info_;
  jinja::Template template_;
};

std::string render_chat(const Tokenizer::ChatTemplateInfo& info, const nlohmann::ordered_json& messages,
                        bool add_generation_prompt, const nlohmann::ordered_json& extra_vars);

// `moerl chat`: each input line {"messages": [...], "add_generation_prompt"?: BOOL, other keys:
// template variables} becomes {"text": RENDERED, "ids": [...]} (ids: encode(text) without
// special tokens added). A bad line is a moerl::Error naming "FILE line N". Returns the
// number of lines.
int64_t chat_jsonl(const Tokenizer& tok, const std::string& model_dir, const std::string& input,
                   const std::string& output);

}  // namespace moerl::model
