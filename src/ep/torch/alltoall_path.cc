// AllToAllPath: the permute / all-to-all-v / unpermute rows path and its error reporting.
#include "ep/torch/alltoall_path.h"

#include <string>

#include "base/error.h"

namespace moerl::ep::detail {
namespace {

at::Tensor bytes_of(const at::Tensor& t) {
  return t.view(at::kByte);  // [N,H] -> [N, H * element size]: gloo has no bfloat16
}

}  // namespace

std::vector<int64_t> send_rows(const RoutedState& st) {
  std::vector<int64_t> rows(st.num_ranks);
  for (int d = 0; d < st.num_ranks; ++d) rows[d] = st.routing.rows_to(d);
  return rows;
}

void AllToAllPath::alltoall(at::Tensor out, at::Tensor in, std::vector<int64_t> out_split,
                            std::vector<int64_t> in_split, const char* what) {
  try {
    alltoall_base(out, in, out_split, in_split);
  } catch (const std::exception& e) {
    std::string peers;
    for (int r = 0; r < num_ranks_; ++r)
      if (r != rank_) peers += (peers.empty() ? "rank " : ", rank ") + std::to_string(r);
    throw Error("ep " + name_ + " rank " + std::to_string(rank_) + ": " + what + " with " + peers +
                    " failed: " + e.what(),
                "a peer is dead, hung or far slower than expected; check its log", ErrorCode::kTimeout);
  }
}

std::pair<at::Tensor, at::Tensor> AllToAllPath::exchange_meta(const at::Tensor& idx_SK, const at::Tensor& w_SK,
                                                              const RoutedState& st) {
  const int64_t K = idx_SK.size(1);
  at::Tensor meta = at::cat({idx_SK, w_SK.view(at::kInt)}, 1).contiguous();
  at::Tensor recv_meta = at::empty({st.num_recv, 2 * K}, meta.options());
  alltoall(recv_meta, meta, st.recv_counts, send_rows(st), "all-to-all of top-k metadata");
  return {recv_meta.narrow(1, 0, K).contiguous(), recv_meta.narrow(1, K, K).contiguous().view(at::kFloat)};
}

at::Tensor AllToAllPath::dispatch_rows(const at::Tensor& x, const std::shared_ptr<RoutedState>& st, Meta) {
  at::Tensor send_x = x.index_select(0, st->row_token);
  at::Tensor recv_x = at::empty({st->num_recv, x.size(1)}, x.options());
  alltoall(bytes_of(recv_x), bytes_of(send_x), st->recv_counts, send_rows(*st), "all-to-all of rows");
  if (st->identity_order()) return recv_x;
  return at::empty_like(recv_x).index_copy_(0, st->recv_pos_t, recv_x);  // unpermute to expert-major order
}

at::Tensor AllToAllPath::combine_rows(const at::Tensor& y, const RoutedState& st) {
  at::Tensor ys = st.identity_order() ? y : y.index_select(0, st.recv_pos_t);  // back to arrival order
  at::Tensor back = at::empty({st.row_token.size(0), y.size(1)}, y.options());
  alltoall(bytes_of(back), bytes_of(ys), send_rows(st), st.recv_counts, "combine all-to-all");
  // Unpermute + reduce, rows in destination-rank order (as fabric sums).
  at::Tensor acc = at::zeros({st.num_tokens, y.size(1)}, y.options().dtype(at::kFloat));
  acc.index_add_(0, st.row_token, back.to(at::kFloat));
  return acc.to(y.scalar_type());
}

}  // namespace moerl::ep::detail
