// Send-plan construction (counting sort by destination, or by destination expert).
#include "ep/kernels/routing.h"

namespace moerl::ep::kernels {

static Routing build_per_rank(const int64_t* idx, const float* w, Routing r) {
  const int64_t T = r.num_tokens, K = r.topk, El = r.experts_per_rank;
  const int R = r.num_ranks;
  std::vector<int64_t> count(R, 0);
  std::vector<uint8_t> hit(T * R, 0);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t k = 0; k < K; ++k) {
      int64_t e = idx[t * K + k];
      if (e >= 0) hit[t * R + e / El] = 1;
    }
    for (int d = 0; d < R; ++d) count[d] += hit[t * R + d];
  }
  r.dest_offsets.assign(R + 1, 0);
  for (int d = 0; d < R; ++d) r.dest_offsets[d + 1] = r.dest_offsets[d] + count[d];
  const int64_t S = r.dest_offsets[R];
  r.row_token.resize(S);
  r.row_topk_idx.assign(S * K, -1);
  r.row_topk_weights.assign(S * K, 0.f);
  std::vector<int64_t> fill(r.dest_offsets.begin(), r.dest_offsets.end() - 1);
  for (int64_t t = 0; t < T; ++t) {
    for (int d = 0; d < R; ++d) {
      if (!hit[t * R + d]) continue;
      const int64_t row = fill[d]++;
      r.row_token[row] = t;
      for (int64_t k = 0; k < K; ++k) {
        int64_t e = idx[t * K + k];
        if (e >= 0 && e / El == d) {
          r.row_topk_idx[row * K + k] = static_cast<int32_t>(e - d * El);
          r.row_topk_weights[row * K + k] = w ? w[t * K + k] : 0.f;
        }
      }
    }
  }
  return r;
}

static Routing build_per_expert(const int64_t* idx, const float* w, Routing r) {
  const int64_t T = r.num_tokens, K = r.topk, El = r.experts_per_rank;
  const int R = r.num_ranks;
  const int64_t E = El * R;
  auto first_occurrence = [&](int64_t t, int64_t k) {
    int64_t e = idx[t * K + k];
    if (e < 0) return false;
    for (int64_t j = 0; j < k; ++j)
      if (idx[t * K + j] == e) return false;
    return true;
  };
  std::vector<int64_t> count(E, 0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k)
      if (first_occurrence(t, k)) ++count[idx[t * K + k]];
  r.expert_offsets.assign(E + 1, 0);
  for (int64_t e = 0; e < E; ++e) r.expert_offsets[e + 1] = r.expert_offsets[e] + count[e];
  r.dest_offsets.assign(R + 1, 0);
  for (int d = 0; d <= R; ++d) r.dest_offsets[d] = r.expert_offsets[d * El];
  const int64_t S = r.expert_offsets[E];
  r.row_token.resize(S);
  r.row_topk_idx.assign(S * K, -1);
  r.row_topk_weights.assign(S * K, 0.f);
  std::vector<int64_t> fill(r.expert_offsets.begin(), r.expert_offsets.end() - 1);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t k = 0; k < K; ++k) {
      if (!first_occurrence(t, k)) continue;
      const int64_t e = idx[t * K + k];
      const int64_t row = fill[e]++;
      r.row_token[row] = t;
      // Every top-k position naming this expert is carried (duplicates stay separate).
      for (int64_t j = k; j < K; ++j) {
        if (idx[t * K + j] != e) continue;
        r.row_topk_idx[row * K + j] = static_cast<int32_t>(e % El);
        r.row_topk_weights[row * K + j] = w ? w[t * K + j] : 0.f;
      }
    }
  }
  return r;
}

Routing build_routing(const int64_t* topk_idx, const float* topk_weights, int64_t num_tokens,
                      int64_t topk, int64_t num_experts, int num_ranks, bool per_expert_rows) {
  Routing r;
  r.num_ranks = num_ranks;
  r.num_tokens = num_tokens;
  r.topk = topk;
  r.experts_per_rank = num_experts / num_ranks;
  r.per_expert_rows = per_expert_rows;
  return per_expert_rows ? build_per_expert(topk_idx, topk_weights, std::move(r))
                         : build_per_rank(topk_idx, topk_weights, std::move(r));
}

}  // namespace moerl::ep::kernels
