// `moerl bench tokenize`: flags -> model::TokenizerBenchConfig; prints one JSON object.
#include <cstdio>

#include "cli/bench.h"
#include "model/tokenizer/tokenizer_bench.h"

namespace moerl::cli {

static int run_bench_tokenize(Args& a) {
  if (a.flag("--help") || a.flag("-h")) {
    std::printf(
        "usage: moerl bench tokenize --model DIR --input FILE [--repeat N] [--runs 5]\n"
        "Single-thread encode speed of DIR's tokenizer on FILE (a .jsonl file's \"text\" fields joined by\n"
        "newlines, any other file as is) repeated N times: the whole text in one encode and line by line\n"
        "(median of --runs after a warm-up), and the BPE merge loop alone against the naive O(n^2) loop.\n"
        "dev/tokenizer/bench_vs_hf.sh runs Hugging Face tokenizers on the same text beside it.\n");
    return 0;
  }
  model::TokenizerBenchConfig c;
  c.model_dir = a.required("--model");
  c.input = a.required("--input");
  c.repeat = a.integer("--repeat", c.repeat);
  c.runs = a.integer("--runs", c.runs);
  a.finish();
  std::printf("%s\n", model::run_tokenizer_bench(c).dump(1).c_str());
  return 0;
}

MOERL_BENCH("tokenize", "tokenizer encode MB/s on one thread (whole text and per line, merge loop vs naive)",
            run_bench_tokenize);

}  // namespace moerl::cli
