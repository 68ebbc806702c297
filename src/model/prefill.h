// Prefill of a batch of ragged prompts for generation, with identical prompts computed once:
// GRPO samples G answers per prompt, so a rollout batch holds each prompt G times. The unique
// prompts are left-padded and prefilled together into a small cache, then each row's slots,
// positions and last-position logits are copied from its prompt's row (KvCache::copy_rows).
// The rows' caches are copies, not shared memory: sharing the memory itself needs a paged
// cache, which the contiguous per-row KvCache is not.
//
//   RoutingRecorder rec(B);
//   Prefill p = prefill_prompts(model, prompts, pad_id, max_new, /*share=*/true, /*max_tokens=*/16384, &rec);
//   p.cache, p.logits_BV [B,V], p.unique_rows (U <= B forwarded)
//
// Forwards at most max_tokens padded prompt tokens at once (rows of the longest prompt's
// length, at least one row per forward; 0: every row in one forward), so a large batch's
// activations need not fit beside the weights and cache at once; the rows' cache slots are
// written in place either way. Under EP (a group of more than one rank) it forwards once,
// whatever U is on this rank: the forwards are collective and the ranks' counts must agree.
// Errors: an empty prompt (moerl::Error naming its row).
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.h"
#include "model/routing_record.h"
#include "model/slot_table.h"

namespace moerl::model {

struct Prefill {
  KvCache cache;         // [B rows, longest prompt + new_tokens], prompt slots filled
  at::Tensor logits_BV;  // last-position logits of every row
  int64_t prompt_slots = 0;  // longest prompt: every row's prompt ends at this slot
  int64_t unique_rows = 0;   // rows the forward ran on (B when share is off)
};

// Throws moerl::Error naming the first empty prompt.
void check_prompts(const std::vector<std::vector<int64_t>>& prompts);

// Rows whose token lists are equal share one forward when `share`; otherwise every row is
// forwarded (the reference for tests and benchmarks). `recorder` (may be null) gets each
// row's prompt routing, as if every row had been forwarded. The cache leaves new_tokens
// slots after the longest prompt.
Prefill prefill_prompts(Model& model, const std::vector<std::vector<int64_t>>& prompts, int64_t pad_id,
                        int64_t new_tokens, bool share, int64_t max_tokens, RoutingRecorder* recorder);

// Prompt tokens each row's cache makes room for: the longest prompt, at least
// config.prompt_room.
int64_t prompt_room(const std::vector<std::vector<int64_t>>& prompts, const GenerateConfig& config);

// Continuous batching (model/slot_table.h), for generate() and the CUDA-graph path: gives the
// table's free rows the waiting prompts and prefills them (shared as above). The first call,
// on an empty cache, makes it: rows sized for prompt_room() plus max_new_tokens, with per-row
// cursors. Later calls prefill into a fresh cache and move the rows in (KvCache::put_rows).
// `recorder` (may be null) gets the prompts' routing at their rows.
struct Admitted {
  std::vector<int64_t> rows;  // the rows given prompts (empty: none waited, or none was free)
  at::Tensor logits_BV;       // their last-position logits [rows, V]
  int64_t prompt_slots = 0;   // where their cursors now stand
  // Their logits in a [rows, V] tensor at their rows, zeros elsewhere (the first admission of a
  // stream may fill fewer rows than the batch has).
  at::Tensor logits_at_rows(int64_t rows) const;
};
Admitted admit_waiting(Model& model, KvCache& cache, SlotTable& table,
                       const std::vector<std::vector<int64_t>>& prompts, const GenerateConfig& config,
                       RoutingRecorder* recorder);

}  // namespace moerl::model
