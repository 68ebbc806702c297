// Packed expert storage: one [E,2I,H] and one [E,H,I] tensor per MoE layer, per-expert views.
#include "model/common/expert_pack.h"

#include "base/error.h"

namespace moerl::model {

namespace {

// `t` is a contiguous [rows, cols] block starting `elem_offset` elements into `base`'s data.
bool sits_at(const at::Tensor& t, const at::Tensor& base, int64_t elem_offset, int64_t rows, int64_t cols) {
  return t.defined() && t.dim() == 2 && t.size(0) == rows && t.size(1) == cols && t.is_contiguous() &&
         t.scalar_type() == base.scalar_type() && t.device() == base.device() &&
         t.data_ptr() == static_cast<const void*>(static_cast<const char*>(base.data_ptr()) +
                                                  elem_offset * static_cast<int64_t>(base.element_size()));
}

// The [E, rows, cols] tensor over `first`'s storage from `first`'s offset, if the storage is
// large enough (an undefined tensor otherwise).
at::Tensor block_over(const at::Tensor& first, int64_t E, int64_t rows, int64_t cols) {
  const int64_t need = first.storage_offset() + E * rows * cols;
  if (static_cast<int64_t>(first.storage().nbytes()) < need * static_cast<int64_t>(first.element_size())) return {};
  return first.detach().as_strided({E, rows, cols}, {rows * cols, cols, 1}, first.storage_offset());
}

}  // namespace

PackedExperts packed_view(const std::vector<ExpertWeights>& experts) {
  if (experts.empty() || !experts[0].gate_IH.defined() || !experts[0].down_HI.defined() ||
      experts[0].gate_IH.dim() != 2) {
    return {};
  }
  const int64_t E = static_cast<int64_t>(experts.size());
  const int64_t I = experts[0].gate_IH.size(0), H = experts[0].gate_IH.size(1);
  at::Tensor w13 = block_over(experts[0].gate_IH, E, 2 * I, H);
  at::Tensor w2 = block_over(experts[0].down_HI, E, H, I);
  if (!w13.defined() || !w2.defined()) return {};
  for (int64_t e = 0; e < E; ++e) {
    const ExpertWeights& x = experts[static_cast<size_t>(e)];
    if (!sits_at(x.gate_IH, w13, e * 2 * I * H, I, H) || !sits_at(x.up_IH, w13, e * 2 * I * H + I * H, I, H) ||
        !sits_at(x.down_HI, w2, e * H * I, H, I)) {
      return {};
    }
  }
  return {w13, w2};
}

std::vector<ExpertWeights> pack_experts(const std::vector<ExpertWeights>& experts) {
  if (experts.empty()) return {};
  const at::Tensor& g0 = experts[0].gate_IH;
  const int64_t E = static_cast<int64_t>(experts.size()), I = g0.size(0), H = g0.size(1);
  at::NoGradGuard no_grad;
  const auto opts = g0.options().requires_grad(false);
  at::Tensor w13 = at::empty({E, 2 * I, H}, opts), w2 = at::empty({E, H, I}, opts);
  std::vector<ExpertWeights> out;
  out.reserve(experts.size());
  for (int64_t e = 0; e < E; ++e) {
    const ExpertWeights& x = experts[static_cast<size_t>(e)];
    if (x.gate_IH.sizes() != g0.sizes() || x.up_IH.sizes() != g0.sizes() || x.down_HI.size(0) != H ||
        x.down_HI.size(1) != I) {
      throw Error("expert " + std::to_string(e) + " of a layer has gate " + c10::str(x.gate_IH.sizes()) + ", up " +
                      c10::str(x.up_IH.sizes()) + ", down " + c10::str(x.down_HI.sizes()) + "; expert 0 has gate " +
                      c10::str(g0.sizes()),
                  "every expert of a layer has the same width (moe_intermediate_size)", ErrorCode::kInternal);
    }
    ExpertWeights v{w13[e].narrow(0, 0, I), w13[e].narrow(0, I, I), w2[e]};
    v.gate_IH.copy_(x.gate_IH);
    v.up_IH.copy_(x.up_IH);
    v.down_HI.copy_(x.down_HI);
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace moerl::model
