// `moerl chat`: a model's chat template over a JSONL file of conversations.
//   moerl chat --model DIR --input IN.jsonl --output OUT.jsonl
// Each {"messages": [...], "add_generation_prompt": BOOL, ...} line becomes {"text": STR,
// "ids": [...]}: the template rendered as transformers' apply_chat_template does (other keys
// of the line, e.g. "enable_thinking", are template variables) and the text encoded without
// adding special tokens. DIR holds tokenizer.json and tokenizer_config.json (or chat_template.jinja).
#include <cstdio>

#include "cli/command.h"
#include "model/tokenizer/chat_template.h"

namespace moerl::cli {

static int run_chat(Args& args) {
  const std::string model_dir = args.required("--model");
  const std::string input = args.required("--input");
  const std::string output = args.required("--output");
  args.finish();
  std::unique_ptr<model::Tokenizer> tok = model::load_tokenizer(model_dir);
  const int64_t n = model::chat_jsonl(*tok, model_dir, input, output);
  std::fprintf(stderr, "chat: %lld conversations rendered %s -> %s\n", static_cast<long long>(n), input.c_str(),
               output.c_str());
  return 0;
}

MOERL_COMMAND("chat", "render JSONL conversations {\"messages\"} with a model's chat template to {\"text\", \"ids\"}",
              run_chat);

}  // namespace moerl::cli
