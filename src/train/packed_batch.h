// Packs experience samples (prompt + response token ids, behaviour logprobs, rewards) into
// right-padded tensors for the trainer, and computes per-token log-probabilities and
// values from model outputs with the shift that aligns position t with token t.
// Legend: B rows (samples), T = longest prompt + response, V vocab, H hidden.
//
//   PackedBatch b = pack_samples(samples, /*pad_id=*/0);
//   at::Tensor logp_BT = token_logprobs(out.logits_BTV, b.input_ids_BT);  // 0 at t = 0
//   // b.response_mask_BT is 1 exactly on response tokens: the loss's mask.
// Pure functions. Empty input or a sample whose logprobs do not match its tokens: Error.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "runtime/records.h"

namespace moerl::train {

struct PackedBatch {
  at::Tensor input_ids_BT;       // int64, prompt then response then pad
  at::Tensor attention_mask_BT;  // int64, 1 on prompt and response tokens
  at::Tensor response_mask_BT;   // float32, 1 on response tokens (the trained positions)
  at::Tensor behav_logp_BT;      // float32, behaviour logprob at response positions, 0 elsewhere
  at::Tensor rewards_B;          // float32
  // Routing replay (R3): [B,T,L,K] int16 expert ids the rollout routed each token to, -1 where
  // none was recorded (the last response token, padding); undefined unless requested.
  at::Tensor routing_replay_BTLK;
  int64_t num_rows = 0;
  int64_t max_len = 0;
};

// with_routing: also pack the samples' recorded routing (every sample must carry it, with
// `num_moe_layers` layers and top-`top_k` slots; a sample without it is an Error).
struct RoutingShape {
  int64_t num_moe_layers = 0, top_k = 0;
};
PackedBatch pack_samples(const std::vector<const runtime::Sample*>& samples, int64_t pad_id,
                         const RoutingShape* with_routing = nullptr);

// The batch with every tensor on `device` (the policy's); no copy when already there.
PackedBatch to_device(PackedBatch b, const at::Device& device);

// Rows [begin, end) of every tensor of the batch (views).
PackedBatch slice_rows(const PackedBatch& b, int64_t begin, int64_t end);

// out[b, t] = log softmax(logits[b, t-1])[ids[b, t]] for t >= 1; out[:, 0] = 0.
at::Tensor token_logprobs(const at::Tensor& logits_BTV, const at::Tensor& ids_BT);
// The logits that predict token t, aligned like token_logprobs: [B,T,V] with row 0 zeroed.
at::Tensor shifted_logits(const at::Tensor& logits_BTV);
// values[b, t] = head(hidden[b, t-1]) for t >= 1; values[:, 0] = 0.
at::Tensor shifted_values(const at::Tensor& hidden_BTH, const at::Tensor& weight_1H,
                          const at::Tensor& bias_1);

}  // namespace moerl::train
