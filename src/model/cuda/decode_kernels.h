// Which of the decode step's own kernels run (process-wide): the MoE experts at decode sizes
// through expert_plan + expert_gemm (model/cuda/expert_gemm.h, chosen by grouped_experts),
// GQA through decode_attention (model/cuda/decode_attention.h, chosen by DecodeStep), and the
// decode loop's sampling through sample_rows (model/cuda/sample_rows.h, in fast_generate.cc;
// its random stream differs from the at:: one's). Off: the at:: ops at every size, which
// `moerl bench gen --compare-kernels` times beside them. A change takes effect at the next
// call: a captured decode graph keeps the kernels it captured.
//
// NOTE: off by default until they have run on a GPU. They were written in sessions that got
// no GPU time (2026-12-07); their GPU tests (ExpertGemmGpu, DecodeAttentionGpu, SampleRowsGpu,
// DecodeKernelsGpu) and `bench gen --compare-kernels` are the first thing to run, and the
// defaults below are then switched on in the same change as the measured figures.
//
//   model::cuda::set_decode_kernels({.experts = true, .attention = true, .sampling = true});
#pragma once

namespace moerl::model::cuda {

struct DecodeKernels {
  bool experts = false;
  bool attention = false;
  bool sampling = false;
};
void set_decode_kernels(DecodeKernels k);
DecodeKernels decode_kernels();

}  // namespace moerl::model::cuda
