#include "train/packed_batch.h"

#include "base/check.h"
#include "base/error.h"

namespace moerl::train {

namespace {

// The recorded routing of every sample as [B,T,L,K] int16, -1 where none was recorded.
at::Tensor pack_routing(const std::vector<const runtime::Sample*>& samples, int64_t T, const RoutingShape& r) {
  const int64_t B = static_cast<int64_t>(samples.size()), per_token = r.num_moe_layers * r.top_k;
  at::Tensor out = at::full({B, T, r.num_moe_layers, r.top_k}, -1, at::kShort);
  int16_t* p = out.data_ptr<int16_t>();
  for (int64_t i = 0; i < B; ++i) {
    const runtime::Sample& s = *samples[i];
    if (s.routed_experts.empty() || s.routing_layers != r.num_moe_layers || s.routing_top_k != r.top_k) {
      throw Error("trainer: algorithm.routing_replay = \"rollout\" but sample " + std::to_string(i) + " carries " +
                      (s.routed_experts.empty() ? std::string("no recorded routing")
                                                : std::to_string(s.routing_layers) + " MoE layers x top-" +
                                                      std::to_string(s.routing_top_k) + " of routing") +
                      " (the policy has " + std::to_string(r.num_moe_layers) + " x top-" + std::to_string(r.top_k) +
                      ")",
                  "run the rollout workers with the same config (they record routing when routing_replay is on) "
                  "and the same model architecture");
    }
    std::copy(s.routed_experts.begin(), s.routed_experts.end(), p + i * T * per_token);
  }
  return out;
}

}  // namespace

PackedBatch pack_samples(const std::vector<const runtime::Sample*>& samples, int64_t pad_id,
                         const RoutingShape* with_routing) {
  if (samples.empty()) throw Error("trainer: empty batch", "the experience buffer returned no samples");
  int64_t B = static_cast<int64_t>(samples.size()), T = 0;
  for (const auto* s : samples) {
    if (s->behaviour_logprobs.size() != s->response_tokens.size()) {
      throw Error("trainer: a sample has " + std::to_string(s->response_tokens.size()) +
                      " response tokens but " + std::to_string(s->behaviour_logprobs.size()) +
                      " behaviour logprobs",
                  "the rollout worker must record one logprob per generated token");
    }
    T = std::max<int64_t>(T, static_cast<int64_t>(s->prompt_tokens.size() + s->response_tokens.size()));
  }
  MOERL_CHECK_GT(T, 1);
  PackedBatch b;
  b.num_rows = B;
  b.max_len = T;
  b.input_ids_BT = at::full({B, T}, pad_id, at::kLong);
  b.attention_mask_BT = at::zeros({B, T}, at::kLong);
  b.response_mask_BT = at::zeros({B, T}, at::kFloat);
  b.behav_logp_BT = at::zeros({B, T}, at::kFloat);
  b.rewards_B = at::zeros({B}, at::kFloat);
  auto ids = b.input_ids_BT.accessor<int64_t, 2>();
  auto att = b.attention_mask_BT.accessor<int64_t, 2>();
  auto resp = b.response_mask_BT.accessor<float, 2>();
  auto behav = b.behav_logp_BT.accessor<float, 2>();
  auto rew = b.rewards_B.accessor<float, 1>();
  for (int64_t i = 0; i < B; ++i) {
    const runtime::Sample& s = *samples[i];
    int64_t t = 0;
    for (int32_t id : s.prompt_tokens) {
      ids[i][t] = id;
      att[i][t++] = 1;
    }
    for (size_t k = 0; k < s.response_tokens.size(); ++k) {
      ids[i][t] = s.response_tokens[k];
      att[i][t] = 1;
      resp[i][t] = 1.0f;
      behav[i][t++] = s.behaviour_logprobs[k];
    }
    rew[i] = s.reward;
  }
  if (with_routing != nullptr) b.routing_replay_BTLK = pack_routing(samples, T, *with_routing);
  return b;
}

PackedBatch to_device(PackedBatch b, const at::Device& device) {
  for (at::Tensor* t : {&b.input_ids_BT, &b.attention_mask_BT, &b.response_mask_BT, &b.behav_logp_BT, &b.rewards_B,
                        &b.routing_replay_BTLK}) {
    if (t->defined()) *t = t->to(device);
  }
  return b;
}

PackedBatch slice_rows(const PackedBatch& b, int64_t begin, int64_t end) {
  PackedBatch s;
  s.input_ids_BT = b.input_ids_BT.slice(0, begin, end);
  s.attention_mask_BT = b.attention_mask_BT.slice(0, begin, end);
  s.response_mask_BT = b.response_mask_BT.slice(0, begin, end);
  s.behav_logp_BT = b.behav_logp_BT.slice(0, begin, end);
  s.rewards_B = b.rewards_B.slice(0, begin, end);
  if (b.routing_replay_BTLK.defined()) s.routing_replay_BTLK = b.routing_replay_BTLK.slice(0, begin, end);
  s.num_rows = end - begin;
  s.max_len = b.max_len;
  return s;
}

at::Tensor token_logprobs(const at::Tensor& logits_BTV, const at::Tensor& ids_BT) {
  MOERL_CHECK_EQ(logits_BTV.dim(), 3);
  int64_t T = logits_BTV.size(1);
  at::Tensor lp = logits_BTV.slice(1, 0, T - 1).to(at::kFloat).log_softmax(-1);
  at::Tensor picked = lp.gather(-1, ids_BT.slice(1, 1, T).unsqueeze(-1)).squeeze(-1);
  return at::constant_pad_nd(picked, {1, 0}, 0.0);
}

at::Tensor shifted_logits(const at::Tensor& logits_BTV) {
  int64_t T = logits_BTV.size(1);
  return at::constant_pad_nd(logits_BTV.slice(1, 0, T - 1), {0, 0, 1, 0}, 0.0);
}

at::Tensor shifted_values(const at::Tensor& hidden_BTH, const at::Tensor& weight_1H,
                          const at::Tensor& bias_1) {
  int64_t T = hidden_BTH.size(1);
  at::Tensor v = at::matmul(hidden_BTH.slice(1, 0, T - 1).to(weight_1H.scalar_type()), weight_1H.t())
                     .squeeze(-1) + bias_1;
  return at::constant_pad_nd(v, {1, 0}, 0.0);
}

}  // namespace moerl::train
