// The baseline Group: the standard expert-parallel path over c10d ProcessGroupGloo —
// permute rows by destination (index_select), exchange counts (all-to-all), all-to-all-v
// of rows and of top-k metadata, unpermute. Same routing and row order as fabric, so the
// two are swappable by config and comparable in `moerl bench ep`.
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "base/env.h"
#include "base/error.h"
#include "ep/ep.h"
#include "ep/torch/fabric_group.h"
#include "ep/torch/routed.h"
#include "ep/torch/tensors.h"
#include "ep/torch/world.h"

namespace moerl::ep {
namespace {

using detail::RoutedState;

class AllToAllGroup final : public Group {
 public:
  AllToAllGroup(const Config& cfg, int64_t num_experts, const detail::World& world)
      : cfg_(cfg), num_experts_(num_experts), rank_(world.rank), num_ranks_(world.world_size) {
    auto opts = c10d::ProcessGroupGloo::Options::create(
        std::chrono::milliseconds(static_cast<int64_t>(cfg.timeout_s * 1000)));
    const std::string addr = env::rendezvous().master_addr;
    const bool local = addr.rfind("127.", 0) == 0 || addr == "localhost";
    opts->devices.push_back(local ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                  : c10d::ProcessGroupGloo::createDefaultDevice());
    opts->threads = 1;
    pg_ = c10::make_intrusive<c10d::ProcessGroupGloo>(world.store, rank_, num_ranks_, opts);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return num_ranks_; }
  int64_t num_experts() const override { return num_experts_; }

  Layout get_dispatch_layout(const at::Tensor& topk_idx_TK, int64_t num_experts) override {
    detail::check_num_experts(num_experts, num_experts_);
    return detail::compute_layout(topk_idx_TK, num_experts, num_ranks_);
  }

  Dispatched dispatch(const at::Tensor& x_TH, const at::Tensor& topk_idx_TK, const at::Tensor& topk_weights_TK,
                      const Layout& layout, const Handle* cached) override {
    std::shared_ptr<RoutedState> st;
    at::Tensor x;
    if (cached) {
      st = detail::state_of(*cached);
      x = x_TH.contiguous();
      if (x.dim() != 2 || x.size(0) != st->num_tokens) {
        throw Error("ep: cached dispatch got x with " + std::to_string(x.dim() == 2 ? x.size(0) : -1) +
                        " rows, expected T=" + std::to_string(st->num_tokens) + " as in the handle",
                    "a cached handle only fits inputs with the same tokens as the dispatch that made it");
      }
    } else {
      auto in = detail::check_dispatch_inputs(x_TH, topk_idx_TK, topk_weights_TK, num_experts_);
      detail::compute_layout(in.topk_idx_TK, num_experts_, num_ranks_);  // validates ids
      st = detail::plan_routing(in.topk_idx_TK, in.topk_weights_TK, num_experts_, num_ranks_, cfg_.mode);
      x = in.x_TH;
    }
    detail::payload_dtype(x, "x");
    const auto& rt = st->routing;
    const int64_t El = rt.experts_per_rank, K = rt.topk, S = rt.num_rows();
    std::vector<int64_t> send_rows(num_ranks_);
    for (int d = 0; d < num_ranks_; ++d) send_rows[d] = rt.rows_to(d);

    if (!cached) {
      // Count exchange: rows per destination (per destination expert in low-latency mode).
      const int64_t C = cfg_.mode == Mode::kNormal ? 1 : El;
      at::Tensor send_counts = at::empty({num_ranks_ * C}, at::kLong);
      int64_t* sc = send_counts.data_ptr<int64_t>();
      for (int d = 0; d < num_ranks_; ++d)
        for (int64_t c = 0; c < C; ++c)
          sc[d * C + c] = C == 1 ? send_rows[d] : rt.expert_offsets[d * El + c + 1] - rt.expert_offsets[d * El + c];
      at::Tensor recv_counts = at::empty_like(send_counts);
      alltoall(recv_counts, send_counts, {}, {}, "count exchange");
      detail::set_recv_counts(*st, std::vector<int64_t>(recv_counts.data_ptr<int64_t>(),
                                                        recv_counts.data_ptr<int64_t>() + recv_counts.numel()));
    }
    // Payload: rows permuted by destination, moved as bytes (gloo has no bfloat16).
    at::Tensor send_x = x.index_select(0, st->row_token);
    at::Tensor recv_x = at::empty({st->num_recv, x.size(1)}, x.options());
    alltoall(bytes_of(recv_x), bytes_of(send_x), st->recv_counts, send_rows, "all-to-all of rows");
    if (!cached) {
      at::Tensor meta = at::cat({at::from_blob(const_cast<int32_t*>(rt.row_topk_idx.data()), {S, K}, at::kInt),
                                 at::from_blob(const_cast<float*>(rt.row_topk_weights.data()), {S, K}, at::kFloat)
                                     .view(at::kInt)},
                                1);
      at::Tensor recv_meta = at::empty({st->num_recv, 2 * K}, at::kInt);
      alltoall(recv_meta, meta, st->recv_counts, send_rows, "all-to-all of top-k metadata");
      at::Tensor idx = recv_meta.narrow(1, 0, K).contiguous();
      at::Tensor w = recv_meta.narrow(1, K, K).contiguous().view(at::kFloat);
      std::vector<const int32_t*> pi(num_ranks_);
      std::vector<const float*> pw(num_ranks_);
      for (int s = 0; s < num_ranks_; ++s) {
        pi[s] = idx.data_ptr<int32_t>() + st->recv_offsets[s] * K;
        pw[s] = w.data_ptr<float>() + st->recv_offsets[s] * K;
      }
      detail::set_recv_meta(*st, pi, pw);
    }
    if (!st->identity_order()) {  // unpermute to expert-major order
      at::Tensor out = at::empty_like(recv_x);
      out.index_copy_(0, st->recv_pos_t, recv_x);
      recv_x = out;
    }
    return detail::make_dispatched(st, recv_x);
  }

  at::Tensor combine(const at::Tensor& y_NH, const Handle& handle) override {
    auto st = detail::state_of(handle);
    at::Tensor y = detail::check_combine_input(y_NH, st->num_recv);
    detail::payload_dtype(y, "combine input y");
    const auto& rt = st->routing;
    std::vector<int64_t> send_rows(num_ranks_);
    for (int d = 0; d < num_ranks_; ++d) send_rows[d] = rt.rows_to(d);
    at::Tensor ys = st->identity_order() ? y : y.index_select(0, st->recv_pos_t);
    at::Tensor back = at::empty({rt.num_rows(), y.size(1)}, y.options());
    alltoall(bytes_of(back), bytes_of(ys), send_rows, st->recv_counts, "combine all-to-all");
    // Unpermute + reduce, rows in destination-rank order (as fabric sums).
    at::Tensor acc = at::zeros({st->num_tokens, y.size(1)}, at::kFloat);
    acc.index_add_(0, st->row_token, back.to(at::kFloat));
    return acc.to(y.scalar_type());
  }

 private:
  static at::Tensor bytes_of(const at::Tensor& t) {
    return t.view(at::kByte);  // [N,H] -> [N, H * element size]
  }
  void alltoall(at::Tensor out, at::Tensor in, std::vector<int64_t> out_split, std::vector<int64_t> in_split,
                const char* what) {
    try {
      auto work = pg_->alltoall_base(out, in, out_split, in_split);
      work->wait();
    } catch (const std::exception& e) {
      std::string peers;
      for (int r = 0; r < num_ranks_; ++r)
        if (r != rank_) peers += (peers.empty() ? "rank " : ", rank ") + std::to_string(r);
      throw Error("ep alltoall rank " + std::to_string(rank_) + ": " + what + " with " + peers +
                      " failed: " + e.what(),
                  "a peer is dead, hung or far slower than expected; check its log", ErrorCode::kTimeout);
    }
  }

  Config cfg_;
  int64_t num_experts_;
  int rank_, num_ranks_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
};

}  // namespace

std::shared_ptr<Group> alltoall_group(const Config& cfg, int64_t num_experts) {
  detail::World w = detail::join_world("alltoall", cfg.timeout_s);
  cfg.validate(num_experts, w.world_size);
  return std::make_shared<AllToAllGroup>(cfg, num_experts, w);
}

}  // namespace moerl::ep
