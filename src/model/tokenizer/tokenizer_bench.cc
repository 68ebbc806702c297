#include "model/tokenizer/tokenizer_bench.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include "base/deadline.h"
#include "base/error.h"
#include "model/tokenizer/hf_tokenizer.h"

namespace moerl::model {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Median seconds of `runs` calls of f after one warm-up call (its time -> *cold).
template <class F>
double timed(int64_t runs, double* cold, F&& f) {
  double t0 = now_seconds();
  f();
  *cold = now_seconds() - t0;
  std::vector<double> s;
  for (int64_t r = 0; r < runs; ++r) {
    t0 = now_seconds();
    f();
    s.push_back(now_seconds() - t0);
  }
  return median(s);
}

nlohmann::json rate(size_t bytes, size_t tokens, double seconds, double cold) {
  return {{"bytes", bytes}, {"tokens", tokens}, {"seconds", seconds}, {"mb_per_s", seconds > 0 ? bytes / seconds / 1e6 : 0.0},
          {"cold_seconds", cold}};
}

// The BPE merge loop alone (no cache): every pre-token of `text`, and one long word (the
// text's bytes as a single pre-token, as a SentencePiece-style segment is), through the fast
// and the naive loop, median of `runs` interleaved runs each; the two must agree.
nlohmann::json merge_loop(const HfTokenizer& tok, const std::string& text, int64_t runs) {
  constexpr size_t kNaiveMaxBytes = 20000;  // the O(n^2) loop on a longer word takes minutes
  const std::vector<std::string> pieces = tok.pre_tokenize(text);
  const std::string long_word = text.substr(0, std::min<size_t>(text.size(), 4096));
  const auto run_all = [&](void (*merge)(std::vector<int32_t>&, const hf::MergeTable&), const std::vector<std::string>& words,
                           std::vector<std::vector<int32_t>>& out) {
    out.clear();
    const double t0 = now_seconds();
    for (const auto& w : words) out.push_back(tok.model().tokenize_uncached(w, merge));
    return now_seconds() - t0;
  };
  nlohmann::json j;
  for (const auto& [name, words] : {std::pair<std::string, std::vector<std::string>>{"pre_tokens", pieces},
                                    std::pair<std::string, std::vector<std::string>>{"long_word", {long_word}}}) {
    size_t longest = 0, tokens = 0;
    for (const auto& w : words) longest = std::max(longest, w.size());
    std::vector<double> fast_s, naive_s;
    std::vector<std::vector<int32_t>> fast, naive;
    for (int64_t r = 0; r < runs; ++r) {
      fast_s.push_back(run_all(hf::merge_word, words, fast));
      if (longest <= kNaiveMaxBytes) naive_s.push_back(run_all(hf::merge_word_naive, words, naive));
    }
    if (longest <= kNaiveMaxBytes && fast != naive) {
      throw Error("bench tokenize: the fast and the naive merge loops disagree on the " + name,
                  "this is a bug in moerl's BPE merge loop; please report it with the tokenizer", ErrorCode::kInternal);
    }
    for (const auto& f : fast) tokens += f.size();
    j[name] = {{"words", words.size()},  {"longest_bytes", longest}, {"tokens", tokens}, {"fast_seconds", median(fast_s)},
               {"naive_seconds", naive_s.empty() ? nlohmann::json() : nlohmann::json(median(naive_s))}};
  }
  return j;
}

}  // namespace

std::string tokenizer_bench_text(const std::string& input, int64_t repeat) {
  std::ifstream f(input, std::ios::binary);
  if (!f) throw Error("cannot read " + input, "check the --input path", ErrorCode::kNotFound);
  std::string text;
  if (input.size() > 6 && input.compare(input.size() - 6, 6, ".jsonl") == 0) {
    size_t n = 0;
    for (std::string line; std::getline(f, line);) {
      ++n;
      if (line.empty()) continue;
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::parse_error& e) {
        throw Error(input + " line " + std::to_string(n) + " is not valid JSON", "each line must be {\"text\": STRING}");
      }
      if (!j.is_object() || !j.contains("text") || !j["text"].is_string()) {
        throw Error(input + " line " + std::to_string(n) + " has no string field \"text\"", "each line must be {\"text\": STRING}");
      }
      if (!text.empty()) text += '\n';
      text += j["text"].get<std::string>();
    }
  } else {
    std::stringstream ss;
    ss << f.rdbuf();
    text = ss.str();
  }
  if (repeat < 1) throw Error("--repeat must be >= 1, got " + std::to_string(repeat), "e.g. --repeat 200");
  std::string big;
  big.reserve(text.size() * static_cast<size_t>(repeat));
  for (int64_t r = 0; r < repeat; ++r) big += text;
  return big;
}

nlohmann::json run_tokenizer_bench(const TokenizerBenchConfig& c) {
  if (c.runs < 1) throw Error("--runs must be >= 1, got " + std::to_string(c.runs), "e.g. --runs 5");
  const std::unique_ptr<Tokenizer> tok = load_tokenizer(c.model_dir);
  const std::string big = tokenizer_bench_text(c.input, c.repeat);

  size_t tokens = 0;
  double cold = 0;
  const double whole_s = timed(c.runs, &cold, [&] { tokens = tok->encode(big, false).size(); });
  nlohmann::json out = rate(big.size(), tokens, whole_s, cold);

  std::vector<std::string> lines;
  for (size_t start = 0;;) {
    const size_t nl = big.find('\n', start);
    lines.push_back(big.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  size_t line_bytes = 0, line_tokens = 0;
  for (const auto& l : lines) line_bytes += l.size();
  double lines_cold = 0;
  const double lines_s = timed(c.runs, &lines_cold, [&] {
    line_tokens = 0;
    for (const auto& l : lines) line_tokens += tok->encode(l, false).size();
  });
  out["lines"] = rate(line_bytes, line_tokens, lines_s, lines_cold);
  out["lines"]["count"] = lines.size();

  if (const auto* hf = dynamic_cast<const HfTokenizer*>(tok.get())) {
    out["merge_loop"] = merge_loop(*hf, tokenizer_bench_text(c.input, 1), c.runs);
  }
  out["model"] = c.model_dir;
  out["input"] = c.input;
  out["repeat"] = c.repeat;
  out["runs"] = c.runs;
  out["threads"] = 1;
  return out;
}

}  // namespace moerl::model
