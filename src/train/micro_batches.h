// How the trainer splits a (mini-)batch's rows into micro-batches, one forward/backward
// each: `micro_batch_size` consecutive rows (the default), or, with a token budget
// (`[train] max_tokens_per_micro_batch`), rows sorted longest first and packed greedily so
// that rows x the micro-batch's longest row stays within the budget. Losses are normalised
// over the whole mini-batch, so any split gives the same update (up to float rounding).
//
//   MicroBatchPlan p = plan_micro_batches(row_lengths(b), begin, end, {.max_rows = 64});
//   for (const MicroBatch& mb : p.micro_batches) { PackedBatch x = take_rows(b, mb); ... }
//
// Legend: B rows, T the batch's longest row (its columns).
// Pure functions.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "train/packed_batch.h"

namespace moerl::train {

struct MicroBatchLimits {
  int64_t max_rows = 64;   // rows per micro-batch, without a token budget
  int64_t max_tokens = 0;  // padded tokens (rows x longest row) per micro-batch; 0: no budget
};

// Rows of a batch taken together, and the columns they need. No rows: a filler, which only
// keeps this rank in step with its expert-parallel peers (zero weight in the loss).
struct MicroBatch {
  std::vector<int64_t> rows;  // indices into the batch, in the order taken
  int64_t num_cols = 0;       // columns kept: the longest row's length (all T without a budget)
  int64_t padded_tokens() const { return static_cast<int64_t>(rows.size()) * num_cols; }
  bool filler() const { return rows.empty(); }
};

struct MicroBatchPlan {
  std::vector<MicroBatch> micro_batches;
  int64_t longest_over_budget = 0;  // the longest row that alone exceeds max_tokens (0: none)
};

// Each row's tokens (prompt + response: its attention mask's sum), in row order.
std::vector<int64_t> row_lengths(const PackedBatch& b);

// Micro-batches of rows [begin, end). Without a budget: runs of max_rows consecutive rows over
// all `num_cols` columns, as always. With one: longest first; a row longer than the budget
// goes alone (and is reported in longest_over_budget).
MicroBatchPlan plan_micro_batches(const std::vector<int64_t>& lengths, int64_t begin, int64_t end, int64_t num_cols,
                                  const MicroBatchLimits& limits);

// Appends fillers until the plan has `count` micro-batches (every rank of an expert-parallel
// group must run the same number of forwards).
void pad_plan(MicroBatchPlan& plan, int64_t count);

// The micro-batch's rows, trimmed to its columns: views when the rows are consecutive and
// keep every column (the plan without a budget), copies otherwise.
PackedBatch take_rows(const PackedBatch& b, const MicroBatch& mb);
at::Tensor take_rows(const at::Tensor& x_BT, const MicroBatch& mb);
// x_BT[rows, :num_cols] = v_BT (other columns untouched).
void put_rows(const at::Tensor& x_BT, const MicroBatch& mb, const at::Tensor& v_BT);

}  // namespace moerl::train
