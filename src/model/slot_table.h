// The rows of a decode batch and the sequences they hold: continuous batching's bookkeeping,
// host side, shared by generate() and the CUDA-graph path. Sequences wait in input order; a
// row whose sequence ends (EOS, a stop string, its token cap) takes the next waiting one at
// the next admit(), instead of idling until the batch's longest sequence ends.
//
//   SlotTable t(prompts.size(), /*rows=*/64, config);
//   for (int64_t row : t.admit()) ... prefill t.sequence(row) into `row`
//   int64_t ended = t.push(row, token, lp, slp);  // >= 0: that sequence ended, the row is free
//   std::vector<Generation> out = t.take();       // in input order
// Streaming (GenerateConfig::stream) adds sequences as it goes (add), tags the weights that
// produced each token (retag) and hands sequences over as they end (stream_exchange).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "model/decode_meter.h"
#include "model/generate.h"

namespace moerl::model {

class SlotTable {
 public:
  // Errors: rows < 1, or a per-prompt cap list of the wrong length or with a value outside
  // [1, max_new_tokens].
  SlotTable(int64_t sequences, int64_t rows, const GenerateConfig& config);

  int64_t rows() const { return static_cast<int64_t>(row_seq_.size()); }
  // Gives free rows the next waiting sequences, lowest row first; returns those rows.
  std::vector<int64_t> admit();
  int64_t sequence(int64_t row) const { return row_seq_[row]; }  // -1: free
  bool busy(int64_t row) const { return row_seq_[row] >= 0; }
  int64_t cap(int64_t sequence) const { return caps_[sequence]; }
  // Appends a sampled token to the row's sequence (a busy row). Returns the sequence when the
  // token ended it (its Generation::finish is set; the row is free), else -1.
  int64_t push(int64_t row, int64_t token, float logprob, float sample_logprob);
  Generation& output(int64_t sequence) { return out_[sequence]; }
  int64_t running() const { return running_; }  // busy rows
  int64_t tokens() const { return tokens_; }    // tokens pushed so far, every sequence
  bool waiting() const { return next_ < static_cast<int64_t>(out_.size()); }
  // Rows that no running or waiting sequence will take.
  int64_t free_rows() const { return rows() - running_ - (static_cast<int64_t>(out_.size()) - next_); }
  std::vector<Generation> take() { return std::move(out_); }
  // Appends `count` sequences (cap max_new_tokens) waiting after the others.
  void add(int64_t count);
  // The weights changed: the running sequences' next tokens, and every later sequence's, come
  // from weights tagged `tag` (Generation::weight_spans).
  void retag(uint64_t tag);
  // The sequences that ended since the last call, in the order they ended.
  std::vector<int64_t> take_ended() { return std::exchange(ended_, {}); }

 private:
  const GenerateConfig& config_;
  std::vector<Generation> out_;
  std::vector<int64_t> caps_;
  std::vector<int64_t> row_seq_;
  std::vector<int64_t> ended_;
  int64_t next_ = 0, running_ = 0, tokens_ = 0;
  uint64_t tag_ = 0;
};

// Rows decoded at once for `sequences` prompts under `config` (GenerateConfig::batch_rows;
// a stream's, whatever the prompts given). Errors: a stream with settings it cannot take.
int64_t decode_rows(int64_t sequences, const GenerateConfig& config);

// Between decode steps of a streaming call: hands the sequences that ended to the stream
// (their outputs moved out, their prompts freed), then feeds it; fed prompts join `prompts`
// and the table. Returns whether the stream changed the weights. Without a stream it only
// forgets the ended. `meter` (optional) is told the records, leases and swap phases.
// Errors: a fed prompt that is empty or longer than `prompt_room`.
bool stream_exchange(SlotTable& table, std::vector<std::vector<int64_t>>& prompts, const GenerateConfig& config,
                     int64_t prompt_room, DecodeMeter* meter = nullptr);

}  // namespace moerl::model
