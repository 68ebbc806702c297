// SlotTable: which row holds which sequence, and each sequence's output.
#include "model/slot_table.h"

#include <algorithm>

#include "base/error.h"

namespace moerl::model {

SlotTable::SlotTable(int64_t sequences, int64_t rows, const GenerateConfig& config)
    : config_(config), out_(sequences), caps_(sequences, config.max_new_tokens), row_seq_(rows, -1) {
  if (rows < 1) throw Error("a decode batch needs at least one row, not " + std::to_string(rows), "");
  const auto& per = config.max_new_tokens_per_prompt;
  if (per.empty()) return;
  if (static_cast<int64_t>(per.size()) != sequences) {
    throw Error("max_new_tokens_per_prompt has " + std::to_string(per.size()) + " entries for " +
                    std::to_string(sequences) + " prompts",
                "give one cap per prompt, or none");
  }
  for (int64_t s = 0; s < sequences; ++s) {
    if (per[s] < 1 || per[s] > config.max_new_tokens) {
      throw Error("max_new_tokens_per_prompt[" + std::to_string(s) + "] = " + std::to_string(per[s]) +
                      " is outside [1, max_new_tokens = " + std::to_string(config.max_new_tokens) + "]",
                  "cap each prompt within max_new_tokens");
    }
    caps_[s] = per[s];
  }
}

std::vector<int64_t> SlotTable::admit() {
  std::vector<int64_t> given;
  for (int64_t r = 0; r < rows() && waiting(); ++r) {
    if (row_seq_[r] >= 0) continue;
    row_seq_[r] = next_++;
    ++running_;
    given.push_back(r);
  }
  return given;
}

int64_t SlotTable::push(int64_t row, int64_t token, float logprob, float sample_logprob) {
  const int64_t s = row_seq_[row];
  Generation& g = out_[s];
  g.tokens.push_back(token);
  g.logprobs.push_back(logprob);
  g.sample_logprobs.push_back(sample_logprob);
  const auto& eos = config_.eos_ids;
  if (std::find(eos.begin(), eos.end(), token) != eos.end()) {
    g.finish = FinishReason::kEos;
  } else if (config_.stop && config_.stop(g.tokens)) {
    g.finish = FinishReason::kStop;
  } else if (static_cast<int64_t>(g.tokens.size()) >= caps_[s]) {
    g.finish = FinishReason::kLength;
  } else {
    return -1;
  }
  row_seq_[row] = -1;
  --running_;
  return s;
}

int64_t decode_rows(int64_t sequences, const GenerateConfig& config) {
  if (config.batch_rows < 0) {
    throw Error("batch_rows=" + std::to_string(config.batch_rows) + " must be >= 0",
                "0 decodes every prompt at once; N keeps N rows busy (continuous batching)");
  }
  return config.batch_rows == 0 ? sequences : std::min(sequences, config.batch_rows);
}

}  // namespace moerl::model
