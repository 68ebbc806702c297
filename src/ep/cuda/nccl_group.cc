// NCCL all-to-all Group: GPU routing plan (masks + nonzero), count exchange, all-to-all-v of
// rows and metadata, unpermute (low-latency: expert-major), index_add combine in fp32.
#include "ep/cuda/nccl_group.h"

#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL  // the header's guard; the GPU libtorch is built with NCCL
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <string>
#include <vector>

#include "base/error.h"
#include "ep/torch/tensors.h"
#include "ep/torch/world.h"

namespace moerl::ep {
namespace {

// What combine (and a cached dispatch) reuse.
struct Plan {
  int64_t num_tokens = 0, num_recv = 0;
  at::Tensor row_token;                // [S] source token of each sent row, by destination
  std::vector<int64_t> send_rows;      // [R] rows to each destination
  std::vector<int64_t> recv_rows;      // [R] rows from each source
  at::Tensor recv_pos;                 // [N] final position of each received row; undefined: identity
  at::Tensor recv_idx, recv_w;         // [N,K] in final order
  std::vector<int64_t> per_expert;     // [E/R]
};

class NcclGroup final : public Group {
 public:
  NcclGroup(const Config& cfg, int64_t num_experts, const detail::World& w)
      : cfg_(cfg), num_experts_(num_experts), rank_(w.rank), num_ranks_(w.world_size) {
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = std::chrono::milliseconds(static_cast<int64_t>(cfg.timeout_s * 1000));
    pg_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(w.store, rank_, num_ranks_, opts);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return num_ranks_; }
  int64_t num_experts() const override { return num_experts_; }

  Layout get_dispatch_layout(const at::Tensor& topk_idx_TK, int64_t num_experts) override {
    detail::check_num_experts(num_experts, num_experts_);
    const int64_t El = num_experts_ / num_ranks_;
    at::Tensor dest = owner(topk_idx_TK, El);
    Layout l;
    l.is_token_in_rank = dest.unsqueeze(1).eq(at::arange(num_ranks_, dest.options()).view({1, num_ranks_, 1})).any(2);
    l.num_tokens_per_rank = l.is_token_in_rank.sum(0);
    at::Tensor valid = topk_idx_TK.ge(0);
    l.num_tokens_per_expert = at::zeros({num_experts_}, topk_idx_TK.options().dtype(at::kLong))
                                  .index_add_(0, topk_idx_TK.masked_select(valid), at::ones_like(topk_idx_TK.masked_select(valid)));
    return l;
  }

  Dispatched dispatch(const at::Tensor& x_TH, const at::Tensor& topk_idx_TK, const at::Tensor& topk_weights_TK,
                      const Layout&, const Handle* cached) override {
    need_cuda(x_TH, "x");
    at::Tensor x = x_TH.contiguous();
    detail::payload_dtype(x, "x");
    std::shared_ptr<Plan> p;
    if (cached) {
      p = std::static_pointer_cast<Plan>(cached->state);
      if (!p || x.dim() != 2 || x.size(0) != p->num_tokens) {
        throw Error("ep nccl: cached dispatch got x with a different token count than the handle",
                    "a cached handle only fits inputs with the same tokens as the dispatch that made it");
      }
    } else {
      p = plan(x, topk_idx_TK, topk_weights_TK);
    }
    at::Tensor recv = at::empty({p->num_recv, x.size(1)}, x.options());
    alltoall(bytes(recv), bytes(x.index_select(0, p->row_token)), p->recv_rows, p->send_rows, "all-to-all of rows");
    if (p->recv_pos.defined()) recv = at::empty_like(recv).index_copy_(0, p->recv_pos, recv);
    Dispatched d;
    d.recv_x_NH = recv;
    d.recv_topk_idx_NK = p->recv_idx;
    d.recv_topk_weights_NK = p->recv_w;
    d.num_recv_tokens_per_expert = p->per_expert;
    d.handle.state = p;
    d.handle.num_tokens = p->num_tokens;
    d.handle.num_recv = p->num_recv;
    return d;
  }

  at::Tensor combine(const at::Tensor& y_NH, const Handle& handle) override {
    auto p = std::static_pointer_cast<Plan>(handle.state);
    if (!p) throw Error("ep nccl: combine got a handle this group did not make", "pass the handle of this group's dispatch");
    need_cuda(y_NH, "y");
    at::Tensor y = detail::check_combine_input(y_NH, p->num_recv);
    detail::payload_dtype(y, "combine input y");
    at::Tensor ys = p->recv_pos.defined() ? y.index_select(0, p->recv_pos) : y;  // back to arrival order
    at::Tensor back = at::empty({p->row_token.size(0), y.size(1)}, y.options());
    alltoall(bytes(back), bytes(ys), p->send_rows, p->recv_rows, "combine all-to-all");
    at::Tensor acc = at::zeros({p->num_tokens, y.size(1)}, y.options().dtype(at::kFloat));
    acc.index_add_(0, p->row_token, back.to(at::kFloat));
    return acc.to(y.scalar_type());
  }

 private:
  static void need_cuda(const at::Tensor& t, const char* what) {
    if (!t.defined() || !t.is_cuda()) {
      throw Error(std::string("ep nccl: ") + what + " must be a CUDA tensor", "move activations to the GPU");
    }
  }
  static at::Tensor bytes(const at::Tensor& t) { return t.view(at::kByte); }
  // Owning rank of each top-k slot, -1 for dropped slots.
  static at::Tensor owner(const at::Tensor& idx, int64_t El) {
    return at::where(idx.ge(0), idx.div(El, "floor"), at::full_like(idx, -1));
  }
  std::vector<int64_t> to_host(const at::Tensor& t) {
    at::Tensor c = t.to(at::kCPU, at::kLong).contiguous();
    return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
  }

  std::shared_ptr<Plan> plan(const at::Tensor& x, const at::Tensor& idx_in, const at::Tensor& w_in) {
    if (!idx_in.defined() || idx_in.dim() != 2 || idx_in.size(0) != x.size(0) || !w_in.defined() ||
        !w_in.sizes().equals(idx_in.sizes())) {
      throw Error("ep nccl: topk_idx and topk_weights must be [T,K] with T = x's rows",
                  "pass the router's top-k ids and weights for the same tokens");
    }
    const at::Tensor idx = idx_in.to(x.device(), at::kLong), w = w_in.to(x.device(), at::kFloat);
    if (idx.lt(-1).logical_or(idx.ge(num_experts_)).any().item<bool>()) {
      throw Error("ep nccl: topk_idx holds ids outside [-1, " + std::to_string(num_experts_) + ")",
                  "expert ids must be < num_experts; -1 marks a dropped slot");
    }
    const int64_t T = x.size(0), K = idx.size(1), R = num_ranks_, El = num_experts_ / R;
    const bool ll = cfg_.mode == Mode::kLowLatency;
    auto p = std::make_shared<Plan>();
    p->num_tokens = T;
    // Rows: one per (destination rank, token), or per (global expert, token) in low-latency
    // mode; nonzero() orders them by destination, then expert, then token.
    const int64_t G = ll ? num_experts_ : R;
    at::Tensor key = ll ? idx : owner(idx, El);  // -1 (dropped) matches no row
    at::Tensor mask_GT = key.unsqueeze(0).eq(at::arange(G, key.options()).view({G, 1, 1})).any(2);
    at::Tensor nz = mask_GT.nonzero();
    at::Tensor row_g = nz.select(1, 0);
    p->row_token = nz.select(1, 1).contiguous();
    at::Tensor keep = key.index_select(0, p->row_token).eq(row_g.unsqueeze(1));
    at::Tensor row_idx_all = idx.index_select(0, p->row_token);
    at::Tensor row_idx = at::where(keep, row_idx_all.remainder(El), at::full_like(row_idx_all, -1));
    at::Tensor row_w_all = w.index_select(0, p->row_token);
    at::Tensor row_w = at::where(keep, row_w_all, at::zeros_like(row_w_all));
    // Count exchange ([R, C]: C = 1, or E/R per-expert counts) and the one host copy.
    const int64_t C = ll ? El : 1;
    at::Tensor send_counts = mask_GT.sum(1).view({R, C});
    at::Tensor recv_counts = at::empty_like(send_counts);
    alltoall(recv_counts.view(-1), send_counts.view(-1), {}, {}, "count exchange");
    std::vector<int64_t> host = to_host(at::cat({send_counts.sum(1), recv_counts.view(-1)}));
    p->send_rows.assign(host.begin(), host.begin() + R);
    std::vector<int64_t> rc(host.begin() + R, host.end());  // [R sources][C]
    p->recv_rows.assign(R, 0);
    for (int64_t s = 0; s < R; ++s)
      for (int64_t c = 0; c < C; ++c) p->recv_rows[s] += rc[s * C + c];
    for (int64_t r : p->recv_rows) p->num_recv += r;
    // Metadata: local ids and weights as one int32 [S, 2K] all-to-all.
    at::Tensor meta = at::cat({row_idx.to(at::kInt), row_w.view(at::kInt)}, 1).contiguous();
    at::Tensor recv_meta = at::empty({p->num_recv, 2 * K}, meta.options());
    alltoall(recv_meta, meta, p->recv_rows, p->send_rows, "all-to-all of top-k metadata");
    at::Tensor ri = recv_meta.narrow(1, 0, K).to(at::kLong), rw = recv_meta.narrow(1, K, K).contiguous().view(at::kFloat);
    if (ll && R > 1) {
      // Arrival order is source-major; the contract is expert-major, then source.
      std::vector<int64_t> pos(p->num_recv);
      std::vector<int64_t> expert_start(El + 1, 0);
      for (int64_t e = 0; e < El; ++e)
        for (int64_t s = 0; s < R; ++s) expert_start[e + 1] += rc[s * C + e];
      for (int64_t e = 0; e < El; ++e) expert_start[e + 1] += expert_start[e];
      int64_t arrival = 0;
      std::vector<int64_t> filled(El, 0);
      for (int64_t s = 0; s < R; ++s)
        for (int64_t e = 0; e < El; ++e)
          for (int64_t j = 0; j < rc[s * C + e]; ++j) pos[arrival++] = expert_start[e] + filled[e]++;
      p->recv_pos = at::tensor(pos, at::kLong).to(x.device());
      ri = at::empty_like(ri).index_copy_(0, p->recv_pos, ri);
      rw = at::empty_like(rw).index_copy_(0, p->recv_pos, rw);
    }
    p->recv_idx = ri;
    p->recv_w = rw;
    p->per_expert = to_host(ri.unsqueeze(2).eq(at::arange(El, ri.options()).view({1, 1, El})).any(1).sum(0));
    return p;
  }

  void alltoall(at::Tensor out, at::Tensor in, std::vector<int64_t> out_split, std::vector<int64_t> in_split,
                const char* what) {
    try {
      pg_->alltoall_base(out, in, out_split, in_split)->wait();
    } catch (const std::exception& e) {
      throw Error("ep nccl rank " + std::to_string(rank_) + ": " + what + " failed: " + e.what(),
                  "a peer is dead, hung or far slower than expected; check its log", ErrorCode::kTimeout);
    }
  }

  Config cfg_;
  int64_t num_experts_;
  int rank_, num_ranks_;
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> pg_;
};

}  // namespace

std::shared_ptr<Group> nccl_group(const Config& cfg, int64_t num_experts) {
  detail::World w = detail::join_world("nccl", cfg.timeout_s);
  cfg.validate(num_experts, w.world_size);
  return std::make_shared<NcclGroup>(cfg, num_experts, w);
}

}  // namespace moerl::ep
