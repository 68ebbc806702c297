// `moerl bench tokenize` without libtorch: the same benchmark (model/tokenizer/tokenizer_bench)
// in a small binary that links only the tokenizer library, statically, so it runs on a machine
// that has no moerl build (dev/tokenizer/build_static_bench.sh; bench_vs_hf.py --moerl PATH).
//   tokenizer_bench [bench tokenize] --model DIR --input FILE [--repeat N] [--runs 5]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/error.h"
#include "model/tokenizer/tokenizer_bench.h"

int main(int argc, char** argv) {
  moerl::model::TokenizerBenchConfig c;
  int i = 1;
  if (argc > 2 && std::string(argv[1]) == "bench" && std::string(argv[2]) == "tokenize") i = 3;
  for (; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--model") {
      c.model_dir = value;
    } else if (flag == "--input") {
      c.input = value;
    } else if (flag == "--repeat") {
      c.repeat = std::atoll(value.c_str());
    } else if (flag == "--runs") {
      c.runs = std::atoll(value.c_str());
    } else {
      std::fprintf(stderr, "tokenizer_bench: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (i != argc || c.model_dir.empty() || c.input.empty()) {
    std::fprintf(stderr, "usage: tokenizer_bench --model DIR --input FILE [--repeat N] [--runs R]\n");
    return 2;
  }
  try {
    std::printf("%s\n", moerl::model::run_tokenizer_bench(c).dump(1).c_str());
  } catch (const moerl::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  return 0;
}
