// The thin at::Tensor layer shared by every Group: checks dtype/shape/contiguity of
// user tensors (throwing moerl::Error with a HINT) and exposes raw pointers to kernels.
#pragma once

#include <ATen/ATen.h>

#include "ep/ep.h"
#include "ep/kernels/routing.h"
#include "ep/kernels/rows.h"

namespace moerl::ep::detail {

// float32 or bfloat16, else Error naming `what`.
kernels::DType payload_dtype(const at::Tensor& t, const char* what);
at::ScalarType scalar_type(kernels::DType d);
// Layout of topk_idx [T,K] int64 for R ranks; validates shapes and ranges.
Layout compute_layout(const at::Tensor& topk_idx_TK, int64_t num_experts, int num_ranks);
// Checks x [T,H], topk_idx [T,K] int64, topk_weights [T,K] and returns them contiguous
// (weights as float32).
struct DispatchInputs {
  at::Tensor x_TH, topk_idx_TK, topk_weights_TK;
};
DispatchInputs check_dispatch_inputs(const at::Tensor& x_TH, const at::Tensor& topk_idx_TK,
                                     const at::Tensor& topk_weights_TK, int64_t num_experts);
// Throws unless get_dispatch_layout's expert count equals the group's.
void check_num_experts(int64_t given, int64_t group);

// Checks a combine input: 2-D, float32/bfloat16, `rows` rows; returns it contiguous.
at::Tensor check_combine_input(const at::Tensor& y_NH, int64_t rows);

}  // namespace moerl::ep::detail
