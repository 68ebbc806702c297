// Routing-state helpers shared by the fabric and alltoall Groups.
#include "ep/torch/routed.h"

#include "base/check.h"
#include "base/error.h"

namespace moerl::ep::detail {

std::shared_ptr<RoutedState> plan_routing(const at::Tensor& topk_idx_TK, const at::Tensor& topk_weights_TK,
                                          int64_t num_experts, int num_ranks, Mode mode) {
  auto st = std::make_shared<RoutedState>();
  st->mode = mode;
  st->num_ranks = num_ranks;
  st->num_tokens = topk_idx_TK.size(0);
  st->routing = kernels::build_routing(topk_idx_TK.data_ptr<int64_t>(), topk_weights_TK.data_ptr<float>(),
                                       topk_idx_TK.size(0), topk_idx_TK.size(1), num_experts, num_ranks,
                                       mode == Mode::kLowLatency);
  st->row_token = at::from_blob(st->routing.row_token.data(), {st->routing.num_rows()}, at::kLong).clone();
  return st;
}

void set_recv_counts(RoutedState& st, const std::vector<int64_t>& counts) {
  const int R = st.num_ranks;
  const int64_t El = st.routing.experts_per_rank;
  st.recv_counts.assign(R, 0);
  st.recv_offsets.assign(R + 1, 0);
  if (st.mode == Mode::kNormal) {
    MOERL_CHECK_EQ(counts.size(), static_cast<size_t>(R));
    st.recv_counts = counts;
  } else {
    MOERL_CHECK_EQ(counts.size(), static_cast<size_t>(R * El));
    st.recv_expert_counts = counts;
    for (int s = 0; s < R; ++s)
      for (int64_t e = 0; e < El; ++e) st.recv_counts[s] += counts[s * El + e];
  }
  for (int s = 0; s < R; ++s) st.recv_offsets[s + 1] = st.recv_offsets[s] + st.recv_counts[s];
  st.num_recv = st.recv_offsets[R];
  if (st.mode == Mode::kLowLatency) {
    // Output is expert-major: (local expert, source, token).
    st.per_expert.assign(El, 0);
    std::vector<int64_t> start(R * El);
    int64_t pos = 0;
    for (int64_t e = 0; e < El; ++e) {
      for (int s = 0; s < R; ++s) {
        start[s * El + e] = pos;
        pos += counts[s * El + e];
        st.per_expert[e] += counts[s * El + e];
      }
    }
    st.recv_pos.resize(st.num_recv);
    int64_t i = 0;
    for (int s = 0; s < R; ++s)
      for (int64_t e = 0; e < El; ++e)
        for (int64_t j = 0; j < counts[s * El + e]; ++j) st.recv_pos[i++] = start[s * El + e] + j;
    st.recv_pos_t = at::from_blob(st.recv_pos.data(), {st.num_recv}, at::kLong).clone();
  }
}

void set_recv_meta(RoutedState& st, const std::vector<const int32_t*>& idx_per_source,
                   const std::vector<const float*>& w_per_source) {
  const int64_t K = st.routing.topk, N = st.num_recv, El = st.routing.experts_per_rank;
  st.recv_topk_idx_NK = at::empty({N, K}, at::kLong);
  st.recv_topk_weights_NK = at::empty({N, K}, at::kFloat);
  int64_t* idx = st.recv_topk_idx_NK.data_ptr<int64_t>();
  float* w = st.recv_topk_weights_NK.data_ptr<float>();
  for (int s = 0; s < st.num_ranks; ++s) {
    for (int64_t j = 0; j < st.recv_counts[s]; ++j) {
      const int64_t i = st.recv_offsets[s] + j;
      const int64_t row = st.recv_pos.empty() ? i : st.recv_pos[i];
      for (int64_t k = 0; k < K; ++k) {
        const int32_t e = idx_per_source[s][j * K + k];
        if (e < -1 || e >= El) {
          throw Error("ep: rank received local expert id " + std::to_string(e) + " from rank " + std::to_string(s) +
                          ", expected [-1, " + std::to_string(El) + ")",
                      "ranks disagree on num_experts or the message was corrupted", ErrorCode::kInternal);
        }
        idx[row * K + k] = e;
        w[row * K + k] = w_per_source[s][j * K + k];
      }
    }
  }
  if (st.mode == Mode::kNormal) {
    st.per_expert.assign(El, 0);
    for (int64_t r = 0; r < N; ++r)
      for (int64_t k = 0; k < K; ++k) {
        const int64_t e = idx[r * K + k];
        bool first = e >= 0;
        for (int64_t j = 0; first && j < k; ++j) first = idx[r * K + j] != e;
        if (first) ++st.per_expert[e];
      }
  }
}

Dispatched make_dispatched(const std::shared_ptr<RoutedState>& st, at::Tensor recv_x_NH) {
  Dispatched d;
  d.recv_x_NH = std::move(recv_x_NH);
  d.recv_topk_idx_NK = st->recv_topk_idx_NK;
  d.recv_topk_weights_NK = st->recv_topk_weights_NK;
  d.num_recv_tokens_per_expert = st->per_expert;
  d.handle.state = st;
  d.handle.num_tokens = st->num_tokens;
  d.handle.num_recv = st->num_recv;
  return d;
}

std::shared_ptr<RoutedState> state_of(const Handle& h) {
  auto st = std::static_pointer_cast<RoutedState>(h.state);
  if (!st) throw Error("ep: combine/cached dispatch got an empty handle", "pass the handle a dispatch returned");
  return st;
}

}  // namespace moerl::ep::detail
