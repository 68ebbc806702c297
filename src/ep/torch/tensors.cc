// Input validation and layout for the tensor layer.
#include "ep/torch/tensors.h"

#include <string>

#include "base/error.h"
#include "ep/kernels/layout.h"

namespace moerl::ep::detail {

static std::string shape_of(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? "," : "") + std::to_string(t.size(i));
  return s + "]";
}

kernels::DType payload_dtype(const at::Tensor& t, const char* what) {
  if (t.scalar_type() == at::kFloat) return kernels::DType::kFloat32;
  if (t.scalar_type() == at::kBFloat16) return kernels::DType::kBFloat16;
  throw Error(std::string("ep: ") + what + " has dtype " + std::string(c10::toString(t.scalar_type())) +
                  ", expected float32 or bfloat16",
              "convert the tensor with .to(at::kFloat) or .to(at::kBFloat16)");
}

at::ScalarType scalar_type(kernels::DType d) {
  return d == kernels::DType::kFloat32 ? at::kFloat : at::kBFloat16;
}

static void check_topk_idx(const at::Tensor& topk_idx_TK) {
  if (topk_idx_TK.dim() != 2 || topk_idx_TK.scalar_type() != at::kLong) {
    throw Error("ep: topk_idx has shape " + shape_of(topk_idx_TK) + " dtype " +
                    std::string(c10::toString(topk_idx_TK.scalar_type())) +
                    ", expected [T,K] int64",
                "pass the router's top-k expert indices as an int64 [tokens, topk] tensor");
  }
}

Layout compute_layout(const at::Tensor& topk_idx_TK, int64_t num_experts, int num_ranks) {
  check_topk_idx(topk_idx_TK);
  if (num_experts <= 0 || num_experts % num_ranks != 0) {
    throw Error("ep: num_experts=" + std::to_string(num_experts) + " must be a positive multiple of " +
                    "the EP world size " + std::to_string(num_ranks),
                "choose ep_size dividing the number of experts");
  }
  at::Tensor idx = topk_idx_TK.to(at::kCPU).contiguous();  // CUDA ids: layout computed (and kept) on the host
  const int64_t T = idx.size(0), K = idx.size(1);
  Layout l;
  l.num_tokens_per_rank = at::empty({num_ranks}, at::kLong);
  l.num_tokens_per_expert = at::empty({num_experts}, at::kLong);
  l.is_token_in_rank = at::empty({T, num_ranks}, at::kBool);
  std::string err = kernels::compute_layout(
      idx.data_ptr<int64_t>(), T, K, num_experts, num_ranks, l.num_tokens_per_rank.data_ptr<int64_t>(),
      l.num_tokens_per_expert.data_ptr<int64_t>(), l.is_token_in_rank.data_ptr<bool>());
  if (!err.empty()) {
    throw Error("ep: " + err, "use -1 for 'no expert' and ids below num_experts");
  }
  return l;
}

DispatchInputs check_dispatch_inputs(const at::Tensor& x_TH, const at::Tensor& topk_idx_TK,
                                     const at::Tensor& topk_weights_TK, int64_t num_experts) {
  check_topk_idx(topk_idx_TK);
  payload_dtype(x_TH, "x");
  if (x_TH.dim() != 2 || x_TH.size(0) != topk_idx_TK.size(0)) {
    throw Error("ep: x has shape " + shape_of(x_TH) + ", expected [T,H] with T=" +
                    std::to_string(topk_idx_TK.size(0)) + " (rows of topk_idx)",
                "flatten tokens to [tokens, hidden] before dispatch");
  }
  if (!topk_weights_TK.defined() || topk_weights_TK.sizes() != topk_idx_TK.sizes() ||
      !at::isFloatingType(topk_weights_TK.scalar_type())) {
    throw Error("ep: topk_weights has shape " +
                    (topk_weights_TK.defined() ? shape_of(topk_weights_TK) : std::string("(undefined)")) +
                    ", expected a floating tensor shaped like topk_idx " + shape_of(topk_idx_TK),
                "pass the router's top-k weights");
  }
  return {x_TH.contiguous(), topk_idx_TK.contiguous(), topk_weights_TK.to(at::kFloat).contiguous()};
}

at::Tensor check_combine_input(const at::Tensor& y_NH, int64_t rows) {
  payload_dtype(y_NH, "combine input y");
  if (y_NH.dim() != 2 || y_NH.size(0) != rows) {
    throw Error("ep: combine input has shape " + shape_of(y_NH) + ", expected [N,H] with N=" +
                    std::to_string(rows) + " (rows received by the matching dispatch)",
                "pass the expert outputs for exactly the rows dispatch returned");
  }
  return y_NH.contiguous();
}

void check_num_experts(int64_t given, int64_t group) {
  if (given != group) {
    throw Error("ep: num_experts=" + std::to_string(given) + " but the group was made for " + std::to_string(group),
                "pass the same expert count to the group and to get_dispatch_layout");
  }
}

}  // namespace moerl::ep::detail
