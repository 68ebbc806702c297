// `moerl bench tokenize`: single-thread encode speed of a model directory's tokenizer on one
// text, as the whole text in one encode() and line by line, plus (for tokenizer.json) the
// BPE merge loop alone (no cache), fast against the textbook O(n^2) loop, on every pre-token
// of the text once and on one long word (its first 4 KiB as a single pre-token).
// dev/tokenizer/bench_vs_hf.sh runs it beside Hugging Face tokenizers on the same text.
//
//   TokenizerBenchConfig c{.model_dir = "m/", .input = "corpus.jsonl", .repeat = 200};
//   std::printf("%s\n", run_tokenizer_bench(c).dump(1).c_str());
//
// The text: a .jsonl input's "text" fields joined by "\n" (make_tokenizer_refs.py's corpus
// text), any other file as it is; then repeated `repeat` times back to back. Each figure is
// the median of `runs` timed runs after one untimed warm-up (reported as cold_seconds): the
// word cache is warm in the timed runs, as it is for tokenizers' own cache.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace moerl::model {

struct TokenizerBenchConfig {
  std::string model_dir, input;
  int64_t repeat = 1;
  int64_t runs = 5;
};

// {"bytes", "tokens", "seconds", "mb_per_s", "cold_seconds", "lines": {...}, "merge_loop": {...}}
nlohmann::json run_tokenizer_bench(const TokenizerBenchConfig& c);

// The benchmark text (see the file comment).
std::string tokenizer_bench_text(const std::string& input, int64_t repeat);

}  // namespace moerl::model
