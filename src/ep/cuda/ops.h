// at::Tensor layer over the CUDA EP kernels (ep/cuda/kernels.h): checks devices, dtypes
// and shapes, allocates outputs, and launches on the current CUDA stream (so the calls can
// be captured into CUDA graphs). No host sync except compute_layout's one error check.
//
//   at::Tensor send = ep::cuda::pack_rows(x_TH, rows_S);               // x[rows]
//   at::Tensor y_TH = ep::cuda::weighted_combine(y_MH, pos_TK, w_TK);  // sum_k w*y[pos]
//
// Thread-safety: as at:: ops. Bad inputs throw moerl::Error naming the argument.
#pragma once

#include <ATen/ATen.h>

#include "ep/ep.h"

namespace moerl::ep::cuda {

// Layout on the GPU (same contract as ep::Group::get_dispatch_layout); throws on ids
// outside [-1, E) after one device->host read of the bad-entry count.
Layout compute_layout(const at::Tensor& topk_idx_TK, int64_t num_experts, int num_ranks);
// out[i] = src[rows[i]]  (any dtype, rows int64 on the same device)
at::Tensor pack_rows(const at::Tensor& src_RH, const at::Tensor& rows);
// dst[rows[i]] = src[i]
void unpack_rows(const at::Tensor& src_NH, const at::Tensor& rows, at::Tensor& dst_RH);
// out[i] = scale[i] * src[rows[i]]  (bf16/f32; scale float32 [n])
at::Tensor pack_rows_scaled(const at::Tensor& src_RH, const at::Tensor& rows, const at::Tensor& scale);
// acc[token[i]] += rows[i] (acc float32 [T,H])
void accumulate_rows(const at::Tensor& rows_NH, const at::Tensor& token, at::Tensor& acc_TH);
// out[t] = sum_k w[t,k] * y[pos[t,k]] over pos >= 0; w undefined means 1. Output dtype = y's.
at::Tensor weighted_combine(const at::Tensor& y_MH, const at::Tensor& pos_TK, const at::Tensor& w_TK);
// dots[t,k] = <a[t], y[pos[t,k]]> in float32 (0 where pos < 0)
at::Tensor row_dots(const at::Tensor& a_TH, const at::Tensor& y_MH, const at::Tensor& pos_TK);

}  // namespace moerl::ep::cuda
