// Which of the decode step's own kernels run (process-wide; all on by default): the MoE
// experts at decode sizes through expert_plan + expert_gemm (model/cuda/expert_gemm.h, chosen
// by grouped_experts), and GQA through decode_attention (model/cuda/decode_attention.h, chosen
// by DecodeStep). Off: the at:: ops at every size, which `moerl bench gen --compare-kernels`
// times beside them. A change takes effect at the next call: a captured decode graph keeps
// the kernels it captured.
//
//   model::cuda::set_decode_kernels({.experts = false, .attention = false});  // the baseline
#pragma once

namespace moerl::model::cuda {

struct DecodeKernels {
  bool experts = true;
  bool attention = true;
};
void set_decode_kernels(DecodeKernels k);
DecodeKernels decode_kernels();

}  // namespace moerl::model::cuda
