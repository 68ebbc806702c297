// Micro-batch planning: fixed row counts, or a padded-token budget over rows sorted by length.
#include "train/micro_batches.h"

#include <algorithm>
#include <numeric>

#include "base/check.h"

namespace moerl::train {
namespace {

bool consecutive(const MicroBatch& mb) {
  for (size_t i = 1; i < mb.rows.size(); ++i) {
    if (mb.rows[i] != mb.rows[i - 1] + 1) return false;
  }
  return true;
}

at::Tensor index_of(const MicroBatch& mb, const at::Device& device) {
  return at::tensor(mb.rows, at::kLong).to(device);
}

}  // namespace

std::vector<int64_t> row_lengths(const PackedBatch& b) {
  at::Tensor n = b.attention_mask_BT.sum(1).to(at::kLong).cpu().contiguous();
  return std::vector<int64_t>(n.data_ptr<int64_t>(), n.data_ptr<int64_t>() + n.numel());
}

MicroBatchPlan plan_micro_batches(const std::vector<int64_t>& lengths, int64_t begin, int64_t end, int64_t num_cols,
                                  const MicroBatchLimits& limits) {
  MOERL_CHECK(0 <= begin && begin <= end && end <= static_cast<int64_t>(lengths.size())) << begin << " " << end;
  MicroBatchPlan plan;
  if (limits.max_tokens <= 0) {
    const int64_t rows = std::max<int64_t>(1, limits.max_rows);
    for (int64_t s = begin; s < end; s += rows) {
      MicroBatch mb{.num_cols = num_cols};
      for (int64_t r = s; r < std::min(end, s + rows); ++r) mb.rows.push_back(r);
      plan.micro_batches.push_back(std::move(mb));
    }
    return plan;
  }
  std::vector<int64_t> order(static_cast<size_t>(end - begin));
  std::iota(order.begin(), order.end(), begin);
  // Longest first (ties in row order): each micro-batch's first row sets its width.
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return lengths[a] > lengths[b]; });
  for (int64_t r : order) {
    const int64_t len = std::max<int64_t>(1, lengths[r]);
    MicroBatch* last = plan.micro_batches.empty() ? nullptr : &plan.micro_batches.back();
    if (last != nullptr && (static_cast<int64_t>(last->rows.size()) + 1) * last->num_cols <= limits.max_tokens) {
      last->rows.push_back(r);
      continue;
    }
    if (len > limits.max_tokens) plan.longest_over_budget = std::max(plan.longest_over_budget, len);
    plan.micro_batches.push_back({.rows = {r}, .num_cols = len});
  }
  return plan;
}

void pad_plan(MicroBatchPlan& plan, int64_t count) {
  while (static_cast<int64_t>(plan.micro_batches.size()) < count) plan.micro_batches.push_back({});
}

at::Tensor take_rows(const at::Tensor& x_BT, const MicroBatch& mb) {
  if (!x_BT.defined()) return x_BT;
  MOERL_CHECK(!mb.filler()) << "a filler micro-batch has no rows";
  if (consecutive(mb) && mb.num_cols == x_BT.size(1)) return x_BT.slice(0, mb.rows.front(), mb.rows.back() + 1);
  return x_BT.index_select(0, index_of(mb, x_BT.device())).narrow(1, 0, mb.num_cols);
}

void put_rows(const at::Tensor& x_BT, const MicroBatch& mb, const at::Tensor& v_BT) {
  if (consecutive(mb) && mb.num_cols == x_BT.size(1)) {
    x_BT.slice(0, mb.rows.front(), mb.rows.back() + 1).copy_(v_BT);
    return;
  }
  x_BT.narrow(1, 0, mb.num_cols).index_copy_(0, index_of(mb, x_BT.device()), v_BT.to(x_BT.scalar_type()));
}

PackedBatch take_rows(const PackedBatch& b, const MicroBatch& mb) {
  PackedBatch out;
  out.input_ids_BT = take_rows(b.input_ids_BT, mb);
  out.attention_mask_BT = take_rows(b.attention_mask_BT, mb);
  out.response_mask_BT = take_rows(b.response_mask_BT, mb);
  out.behav_logp_BT = take_rows(b.behav_logp_BT, mb);
  out.rewards_B = b.rewards_B.index_select(0, index_of(mb, b.rewards_B.device()));
  out.routing_replay_BTLK = take_rows(b.routing_replay_BTLK, mb);
  out.num_rows = static_cast<int64_t>(mb.rows.size());
  out.max_len = mb.num_cols;
  return out;
}

}  // namespace moerl::train
