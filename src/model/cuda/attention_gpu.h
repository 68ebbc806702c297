// Attention of several query positions (training forwards, prefill) on the GPU through
// at::scaled_dot_product_attention: fused kernels (memory-efficient or cuDNN attention under
// the boolean mask) instead of float32 scores, mask and softmax materialised per block. Decode
// steps (one query position) keep model::attention_core's blocks, as the CUDA-graph decode
// does the same math.
//
//   model::cuda::install_cuda_attention();   // job::enable_gpu_paths does it
//   at::Tensor o_BTHD = model::cuda::fused_attention(q, k, v, allowed_B1TS, scale);
//
// Contract of model::attention_core (model/common/attention.h): a query with no allowed slot
// attends uniformly over all slots. Applies to bf16/fp16 CUDA inputs; others return an
// undefined tensor (not handled).
#pragma once

#include <ATen/ATen.h>

namespace moerl::model::cuda {

at::Tensor fused_attention(const at::Tensor& q_BhTD, const at::Tensor& k_BhSD, const at::Tensor& v_BhSD,
                           const at::Tensor& allowed_B1TS, double scale);

// Registers fused_attention as model::attention_core's hook.
void install_cuda_attention();

}  // namespace moerl::model::cuda
