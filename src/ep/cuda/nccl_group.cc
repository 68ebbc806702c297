// NCCL all-to-all Group: GPU routing plan (masks + nonzero), count exchange, all-to-all-v of
// rows and metadata, unpermute (low-latency: expert-major), index_add combine in fp32. The
// rows path is AllToAllPath's and the checks and Dispatched result RoutedGroup's
// (ep/torch/alltoall_path.h, routed.h); this file is the device plan and the NCCL call.
#include "ep/cuda/nccl_group.h"

#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL  // the header's guard; the GPU libtorch is built with NCCL
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <string>
#include <vector>

#include "base/error.h"
#include "ep/torch/device_plan.h"
#include "ep/torch/alltoall_path.h"
#include "ep/torch/tensors.h"
#include "ep/torch/world.h"

namespace moerl::ep {
namespace {

using detail::DevicePlan;
using detail::device_plan;
using detail::host_values;
using detail::owner_rank;
using detail::RoutedState;

class NcclGroup final : public detail::AllToAllOver<c10d::ProcessGroupNCCL> {
 public:
  NcclGroup(const Config& cfg, int64_t num_experts, const detail::World& w)
      : AllToAllOver("nccl", cfg, num_experts, w.rank, w.world_size) {
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = std::chrono::milliseconds(static_cast<int64_t>(cfg.timeout_s * 1000));
    pg_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(w.store, rank_, num_ranks_, opts);
  }

  Layout get_dispatch_layout(const at::Tensor& topk_idx_TK, int64_t num_experts) override {
    detail::check_num_experts(num_experts, num_experts_);
    const int64_t El = num_experts_ / num_ranks_;
    at::Tensor dest = owner_rank(topk_idx_TK, El);
    Layout l;
    l.is_token_in_rank = dest.unsqueeze(1).eq(at::arange(num_ranks_, dest.options()).view({1, num_ranks_, 1})).any(2);
    l.num_tokens_per_rank = l.is_token_in_rank.sum(0);
    at::Tensor valid = topk_idx_TK.ge(0);
    l.num_tokens_per_expert = at::zeros({num_experts_}, topk_idx_TK.options().dtype(at::kLong))
                                  .index_add_(0, topk_idx_TK.masked_select(valid), at::ones_like(topk_idx_TK.masked_select(valid)));
    return l;
  }

 protected:
  void check_device(const at::Tensor& t, const char* what) const override {
    if (!t.defined() || !t.is_cuda()) {
      throw Error(std::string("ep nccl: ") + what + " must be a CUDA tensor", "move activations to the GPU");
    }
  }

  // The routing plan on the GPU, the count exchange and its one host copy, and the top-k
  // metadata: the state's host send plan holds only the sizes and dest_offsets.
  std::shared_ptr<RoutedState> plan(const detail::DispatchInputs& in, const Layout&) override {
    const at::Tensor& x = in.x_TH;
    const at::Tensor idx = in.topk_idx_TK.to(x.device()), w = in.topk_weights_TK.to(x.device());
    // Rows: one per (destination rank, token), or per (global expert, token) in low-latency mode.
    DevicePlan p = device_plan(idx, w, num_experts_, num_ranks_, cfg_.mode);
    if (p.num_bad.item<int64_t>() > 0) {
      throw Error("ep nccl: topk_idx holds ids outside [-1, " + std::to_string(num_experts_) + ")",
                  "expert ids must be < num_experts; -1 marks a dropped slot");
    }
    const int64_t T = x.size(0), K = idx.size(1), R = num_ranks_, El = num_experts_ / R;
    const bool ll = cfg_.mode == Mode::kLowLatency;
    auto st = std::make_shared<RoutedState>();
    st->mode = cfg_.mode;
    st->num_ranks = num_ranks_;
    st->num_tokens = T;
    st->routing.num_ranks = num_ranks_;
    st->routing.num_tokens = T;
    st->routing.topk = K;
    st->routing.experts_per_rank = El;
    st->routing.per_expert_rows = ll;
    st->row_token = p.row_token;
    // Count exchange ([R, C]: C = 1, or E/R per-expert counts) and the one host copy.
    const int64_t C = ll ? El : 1;
    at::Tensor send_counts = p.group_rows.view({R, C});
    at::Tensor recv_counts = at::empty_like(send_counts);
    alltoall(recv_counts.view(-1), send_counts.view(-1), {}, {}, "count exchange");
    std::vector<int64_t> host = host_values(at::cat({send_counts.sum(1), recv_counts.view(-1)}));
    st->routing.dest_offsets.assign(R + 1, 0);
    for (int64_t d = 0; d < R; ++d) st->routing.dest_offsets[d + 1] = st->routing.dest_offsets[d] + host[d];
    // [R sources][C]: recv_counts/offsets and, in low-latency mode, the expert-major recv_pos.
    detail::set_recv_counts(*st, std::vector<int64_t>(host.begin() + R, host.end()));
    if (st->recv_pos_t.defined()) st->recv_pos_t = st->recv_pos_t.to(x.device());
    auto [ri32, rw] = exchange_meta(p.row_idx, p.row_w, *st);
    detail::set_recv_topk(*st, ri32, rw);
    const at::Tensor& ri = st->recv_topk_idx_NK;
    st->per_expert = host_values(ri.unsqueeze(2).eq(at::arange(El, ri.options()).view({1, 1, El})).any(1).sum(0));
    return st;
  }
};

}  // namespace

std::shared_ptr<Group> nccl_group(const Config& cfg, int64_t num_experts) {
  return detail::make_world_group<NcclGroup>("nccl", cfg, num_experts);
}

DeviceAllReduce nccl_allreduce(const detail::World& world, double timeout_s) {
  auto opts = c10d::ProcessGroupNCCL::Options::create();
  opts->timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  auto pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(world.store, world.rank, world.world_size, opts);
  return [pg](at::Tensor& t) {
    std::vector<at::Tensor> v{t};
    pg->allreduce(v)->wait();
  };
}

}  // namespace moerl::ep
