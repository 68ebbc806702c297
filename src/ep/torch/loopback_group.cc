// The one-rank Group: routing is local, so dispatch returns x itself when every token has
// an expert, and combine returns y itself; only tokens routed nowhere cost a gather.
#include <memory>

#include "base/error.h"
#include "ep/ep.h"
#include "ep/torch/tensors.h"

namespace moerl::ep {
namespace {

struct LoopbackState {
  at::Tensor rows;  // int64 [N] source tokens kept; undefined = all tokens, in order
  at::Tensor recv_topk_idx_NK, recv_topk_weights_NK;
  std::vector<int64_t> per_expert;
};

class LoopbackGroup final : public Group {
 public:
  explicit LoopbackGroup(int64_t num_experts) : num_experts_(num_experts) {}
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  int64_t num_experts() const override { return num_experts_; }

  Layout get_dispatch_layout(const at::Tensor& topk_idx_TK, int64_t num_experts) override {
    detail::check_num_experts(num_experts, num_experts_);
    return detail::compute_layout(topk_idx_TK, num_experts, 1);
  }

  Dispatched dispatch(const at::Tensor& x_TH, const at::Tensor& topk_idx_TK,
                      const at::Tensor& topk_weights_TK, const Layout& layout,
                      const Handle* cached) override {
    if (cached) return dispatch_cached(x_TH, *cached);
    auto in = detail::check_dispatch_inputs(x_TH, topk_idx_TK, topk_weights_TK, num_experts_);
    Layout l = layout.num_tokens_per_expert.defined() ? layout
                                                      : detail::compute_layout(in.topk_idx_TK, num_experts_, 1);
    auto st = std::make_shared<LoopbackState>();
    at::Tensor valid = in.topk_idx_TK.ge(0);
    const bool any_dropped_slot = !valid.all().item<bool>();
    at::Tensor w = any_dropped_slot ? in.topk_weights_TK.masked_fill(valid.logical_not(), 0.f)
                                    : in.topk_weights_TK;
    at::Tensor in_rank = l.is_token_in_rank.select(1, 0);
    Dispatched d;
    if (in_rank.all().item<bool>()) {
      d.recv_x_NH = in.x_TH;
      st->recv_topk_idx_NK = in.topk_idx_TK;
      st->recv_topk_weights_NK = w;
    } else {
      st->rows = in_rank.nonzero().select(1, 0).contiguous().to(in.x_TH.device());
      d.recv_x_NH = in.x_TH.index_select(0, st->rows);
      st->recv_topk_idx_NK = in.topk_idx_TK.index_select(0, st->rows);
      st->recv_topk_weights_NK = w.index_select(0, st->rows);
    }
    at::Tensor pe = l.num_tokens_per_expert.contiguous();
    st->per_expert.assign(pe.data_ptr<int64_t>(), pe.data_ptr<int64_t>() + pe.numel());
    d.recv_topk_idx_NK = st->recv_topk_idx_NK;
    d.recv_topk_weights_NK = st->recv_topk_weights_NK;
    d.num_recv_tokens_per_expert = st->per_expert;
    d.handle.num_tokens = in.x_TH.size(0);
    d.handle.num_recv = d.recv_x_NH.size(0);
    d.handle.state = st;
    return d;
  }

  at::Tensor combine(const at::Tensor& y_NH, const Handle& handle) override {
    auto st = state_of(handle);
    at::Tensor y = detail::check_combine_input(y_NH, handle.num_recv);
    if (!st->rows.defined()) return y;
    at::Tensor out = at::zeros({handle.num_tokens, y.size(1)}, y.options());
    out.index_copy_(0, st->rows, y);
    return out;
  }

 private:
  static std::shared_ptr<LoopbackState> state_of(const Handle& h) {
    auto st = std::static_pointer_cast<LoopbackState>(h.state);
    if (!st) throw Error("ep: combine/cached dispatch got an empty handle", "pass the handle a dispatch returned");
    return st;
  }
  Dispatched dispatch_cached(const at::Tensor& x_TH, const Handle& h) {
    auto st = state_of(h);
    payload_dtype_check(x_TH, h.num_tokens);
    Dispatched d;
    d.recv_x_NH = st->rows.defined() ? x_TH.contiguous().index_select(0, st->rows) : x_TH.contiguous();
    d.recv_topk_idx_NK = st->recv_topk_idx_NK;
    d.recv_topk_weights_NK = st->recv_topk_weights_NK;
    d.num_recv_tokens_per_expert = st->per_expert;
    d.handle = h;
    return d;
  }
  static void payload_dtype_check(const at::Tensor& x, int64_t T) {
    detail::payload_dtype(x, "x");
    if (x.dim() != 2 || x.size(0) != T) {
      throw Error("ep: cached dispatch got x with " + std::to_string(x.dim() == 2 ? x.size(0) : -1) +
                      " rows, expected [T,H] with T=" + std::to_string(T) + " as in the cached handle",
                  "a cached handle only fits inputs with the same tokens as the dispatch that made it");
    }
  }
  int64_t num_experts_;
};

}  // namespace

std::shared_ptr<Group> loopback_group(int64_t num_experts) {
  if (num_experts <= 0) {
    throw Error("ep: num_experts=" + std::to_string(num_experts) + " must be positive",
                "pass the model's expert count");
  }
  return std::make_shared<LoopbackGroup>(num_experts);
}

}  // namespace moerl::ep
