// `moerl tokenize`: a model directory's tokenizer over a JSONL file.
//   moerl tokenize --model DIR --input IN.jsonl --output OUT.jsonl [--decode]
// Each {"text": STR} line becomes {"ids": [...]} (no special tokens added); with --decode
// each {"ids": [...]} line becomes {"text": STR} (special tokens kept). DIR is a model
// directory or one holding just the tokenizer files (tokenizer.json, tokenizer_config.json,
// generation_config.json; or moerl_tokenizer.json).
#include <cstdio>

#include "cli/command.h"
#include "model/tokenizer/tokenize_jsonl.h"

namespace moerl::cli {

static int run_tokenize(Args& args) {
  const std::string model_dir = args.required("--model");
  const std::string input = args.required("--input");
  const std::string output = args.required("--output");
  const bool decode = args.flag("--decode");
  args.finish();
  std::unique_ptr<model::Tokenizer> tok = model::load_tokenizer(model_dir);
  const int64_t n = model::tokenize_jsonl(*tok, input, output,
                                          decode ? model::TokenizeDirection::kDecode : model::TokenizeDirection::kEncode);
  std::fprintf(stderr, "tokenize: %lld lines %s -> %s\n", static_cast<long long>(n), decode ? "decoded" : "encoded",
               output.c_str());
  return 0;
}

MOERL_COMMAND("tokenize", "encode a JSONL file of {\"text\"} to {\"ids\"} with a model's tokenizer (--decode: back)",
              run_tokenize);

}  // namespace moerl::cli
