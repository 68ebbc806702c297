// The one-rank Group: routing is local, so dispatch returns x itself when every token has
// an expert, and combine returns y itself; only tokens routed nowhere cost a gather.
// Checks, cached handles and the Dispatched result are RoutedGroup's (ep/torch/routed.h).
#include <memory>

#include "base/error.h"
#include "ep/ep.h"
#include "ep/torch/routed.h"
#include "ep/torch/tensors.h"

namespace moerl::ep {
namespace {

using detail::RoutedState;

class LoopbackGroup final : public detail::RoutedGroup {
 public:
  explicit LoopbackGroup(int64_t num_experts) : RoutedGroup("loopback", Config{}, num_experts, 0, 1) {}

 protected:
  // Kept tokens (row_token; undefined = all, in order) and their top-k as given, global
  // ids being local ones on one rank; weights of -1 slots are zeroed. Mode is ignored.
  std::shared_ptr<RoutedState> plan(const detail::DispatchInputs& in, const Layout& layout) override {
    Layout l = layout.num_tokens_per_expert.defined() ? layout
                                                      : detail::compute_layout(in.topk_idx_TK, num_experts_, 1);
    auto st = std::make_shared<RoutedState>();
    st->num_tokens = in.x_TH.size(0);
    at::Tensor valid = in.topk_idx_TK.ge(0);
    const bool any_dropped_slot = !valid.all().item<bool>();
    at::Tensor w = any_dropped_slot ? in.topk_weights_TK.masked_fill(valid.logical_not(), 0.f)
                                    : in.topk_weights_TK;
    at::Tensor in_rank = l.is_token_in_rank.select(1, 0);
    if (in_rank.all().item<bool>()) {
      st->recv_topk_idx_NK = in.topk_idx_TK;
      st->recv_topk_weights_NK = w;
      st->num_recv = st->num_tokens;
    } else {
      st->row_token = in_rank.nonzero().select(1, 0).contiguous().to(in.x_TH.device());
      st->recv_topk_idx_NK = in.topk_idx_TK.index_select(0, st->row_token);
      st->recv_topk_weights_NK = w.index_select(0, st->row_token);
      st->num_recv = st->row_token.size(0);
    }
    at::Tensor pe = l.num_tokens_per_expert.contiguous();
    st->per_expert.assign(pe.data_ptr<int64_t>(), pe.data_ptr<int64_t>() + pe.numel());
    return st;
  }

  at::Tensor dispatch_rows(const at::Tensor& x, const std::shared_ptr<RoutedState>& st, Meta) override {
    return st->row_token.defined() ? x.index_select(0, st->row_token) : x;
  }

  at::Tensor combine_rows(const at::Tensor& y, const RoutedState& st) override {
    if (!st.row_token.defined()) return y;
    at::Tensor out = at::zeros({st.num_tokens, y.size(1)}, y.options());
    out.index_copy_(0, st.row_token, y);
    return out;
  }
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
