// SlotTable: which row holds which sequence, and each sequence's output.
#include "model/slot_table.h"

#include <algorithm>

#include "base/error.h"

namespace moerl::model {

SlotTable::SlotTable(int64_t sequences, int64_t rows, const GenerateConfig& config)
    : config_(config), out_(sequences), caps_(sequences, config.max_new_tokens), row_seq_(rows, -1),
      tag_(config.weights_tag) {
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
    out_[row_seq_[r]].weight_spans = {{0, tag_}};
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
  ++tokens_;
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
  ended_.push_back(s);
  return s;
}

void SlotTable::add(int64_t count) {
  out_.resize(out_.size() + count);
  caps_.resize(caps_.size() + count, config_.max_new_tokens);
}

void SlotTable::retag(uint64_t tag) {
  tag_ = tag;
  for (int64_t s : row_seq_) {
    if (s < 0) continue;
    auto& spans = out_[s].weight_spans;
    const int64_t at = static_cast<int64_t>(out_[s].tokens.size());
    if (!spans.empty() && spans.back().start == at) {
      spans.back().tag = tag;  // no token came from the weights it replaces
    } else {
      spans.push_back({at, tag});
    }
  }
}

int64_t decode_rows(int64_t sequences, const GenerateConfig& config) {
  if (config.batch_rows < 0) {
    throw Error("batch_rows=" + std::to_string(config.batch_rows) + " must be >= 0",
                "0 decodes every prompt at once; N keeps N rows busy (continuous batching)");
  }
  if (config.stream != nullptr) {
    if (config.batch_rows == 0 || config.all_done || !config.max_new_tokens_per_prompt.empty()) {
      throw Error("a streaming generate() needs batch_rows > 0 (it has " + std::to_string(config.batch_rows) +
                      "), no expert-parallel lockstep and no per-prompt caps",
                  "set [rollout] batch_rows; an EP rollout instance generates its batch whole");
    }
    return config.batch_rows;
  }
  return config.batch_rows == 0 ? sequences : std::min(sequences, config.batch_rows);
}

bool stream_exchange(SlotTable& table, std::vector<std::vector<int64_t>>& prompts, const GenerateConfig& config,
                     int64_t prompt_room, DecodeMeter* meter) {
  const std::vector<int64_t> ended = table.take_ended();
  if (config.stream == nullptr) return false;
  if (meter != nullptr) meter->enter(DecodePhase::kRecords);
  for (int64_t s : ended) {
    std::vector<int64_t>().swap(prompts[s]);
    config.stream->finished(s, std::exchange(table.output(s), Generation{}));
  }
  if (meter != nullptr) meter->enter(DecodePhase::kLeases);
  StreamFeed f = config.stream->feed(table.free_rows(), prompt_room);
  if (meter != nullptr && f.weights_tag) meter->relabel(DecodePhase::kSwap);
  for (auto& p : f.prompts) {
    if (p.empty() || static_cast<int64_t>(p.size()) > prompt_room) {
      throw Error("a stream fed a prompt of " + std::to_string(p.size()) + " tokens into rows with room for " +
                      std::to_string(prompt_room),
                  "feed non-empty prompts within the prompt_room feed() is given; keep longer ones for a later call");
    }
    prompts.push_back(std::move(p));
  }
  table.add(static_cast<int64_t>(f.prompts.size()));
  if (f.weights_tag) table.retag(*f.weights_tag);
  return f.weights_tag.has_value();
}

}  // namespace moerl::model
