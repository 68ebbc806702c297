// Routing-state helpers and the RoutedGroup prologue/epilogue shared by every Group.
#include "ep/torch/routed.h"

#include <utility>

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

void set_recv_topk(RoutedState& st, const at::Tensor& ids_NK, const at::Tensor& weights_NK) {
  at::Tensor ri = ids_NK.to(at::kLong), rw = weights_NK;
  if (!st.identity_order()) {
    ri = at::empty_like(ri).index_copy_(0, st.recv_pos_t, ri);
    rw = at::empty_like(rw).index_copy_(0, st.recv_pos_t, rw);
  }
  st.recv_topk_idx_NK = ri;
  st.recv_topk_weights_NK = rw;
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

RoutedGroup::RoutedGroup(std::string name, const Config& cfg, int64_t num_experts, int rank, int num_ranks,
                         std::optional<BufferLayout> buffers)
    : name_(std::move(name)),
      cfg_(cfg),
      num_experts_(num_experts),
      rank_(rank),
      num_ranks_(num_ranks),
      buffers_(std::move(buffers)) {}

Layout RoutedGroup::get_dispatch_layout(const at::Tensor& topk_idx_TK, int64_t num_experts) {
  check_num_experts(num_experts, num_experts_);
  return compute_layout(topk_idx_TK, num_experts, num_ranks_);
}

std::shared_ptr<RoutedState> RoutedGroup::plan(const DispatchInputs& in, const Layout& layout) {
  const at::Tensor idx = in.topk_idx_TK.cpu(), w = in.topk_weights_TK.cpu();
  compute_layout(idx, num_experts_, num_ranks_);  // validates ids
  return plan_routing(idx, w, num_experts_, num_ranks_, cfg_.mode);
}

Dispatched RoutedGroup::dispatch(const at::Tensor& x_TH, const at::Tensor& topk_idx_TK,
                                 const at::Tensor& topk_weights_TK, const Layout& layout, const Handle* cached) {
  check_device(x_TH, "x");
  std::shared_ptr<RoutedState> st;
  at::Tensor x;
  if (cached) {
    st = state_of(*cached);
    x = x_TH.contiguous();
    if (x.dim() != 2 || x.size(0) != st->num_tokens) {
      throw Error("ep: cached dispatch got x with " + std::to_string(x.dim() == 2 ? x.size(0) : -1) +
                      " rows, expected T=" + std::to_string(st->num_tokens) + " as in the handle",
                  "a cached handle only fits inputs with the same tokens as the dispatch that made it");
    }
  } else {
    DispatchInputs in = check_dispatch_inputs(x_TH, topk_idx_TK, topk_weights_TK, num_experts_);
    if (buffers_) buffers_->check_dispatch(in.topk_idx_TK.size(0), in.topk_idx_TK.size(1), name_);
    st = plan(in, layout);
    x = in.x_TH;
  }
  payload_dtype(x, "x");
  if (buffers_) buffers_->check_row_bytes(x.size(1) * x.element_size(), "x", name_);
  const bool staged = moves_host_memory() && !x.is_cpu();
  at::Tensor recv_x_NH = dispatch_rows(staged ? x.cpu() : x, st, cached ? Meta::kReuse : Meta::kExchange);
  if (staged) {
    recv_x_NH = recv_x_NH.to(x.device());
    st->recv_topk_idx_NK = st->recv_topk_idx_NK.to(x.device());
    st->recv_topk_weights_NK = st->recv_topk_weights_NK.to(x.device());
  }
  return make_dispatched(st, std::move(recv_x_NH));
}

at::Tensor RoutedGroup::combine(const at::Tensor& y_NH, const Handle& handle) {
  auto st = state_of(handle);
  check_device(y_NH, "y");
  at::Tensor y = check_combine_input(y_NH, st->num_recv);
  if (buffers_) buffers_->check_row_bytes(y.size(1) * y.element_size(), "combine input y", name_);
  if (moves_host_memory() && !y.is_cpu()) return combine_rows(y.cpu(), *st).to(y.device());
  return combine_rows(y, *st);
}

}  // namespace moerl::ep::detail
