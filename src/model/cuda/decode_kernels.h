// Which of the decode step's own kernels run (process-wide): the MoE experts at decode sizes
// through expert_plan + expert_gemm (model/cuda/expert_gemm.h, chosen by grouped_experts),
// GQA through decode_attention (model/cuda/decode_attention.h, chosen by DecodeStep), and the
// decode loop's sampling through sample_rows (model/cuda/sample_rows.h, in fast_generate.cc;
// its random stream differs from the at:: one's). Off: the at:: ops at every size, which
// `moerl bench gen --compare-kernels` times beside them. A change takes effect at the next
// call: a captured decode graph keeps the kernels it captured.
//
// On by default since their first GPU run (2026-12-07, H100): their tests (ExpertGemmGpu,
// DecodeAttentionGpu, SampleRowsGpu, DecodeKernelsGpu) pass, and at 48 layers and batch 64
// the step took 26.7 ms against the at:: ops' 36.9 (docs/perf.md). Off is kept for the
// comparison and as a way around a kernel suspected of a fault.
//
//   model::cuda::set_decode_kernels({.experts = true, .attention = true, .sampling = true});
#pragma once

namespace moerl::model::cuda {

struct DecodeKernels {
  bool experts = true;
  bool attention = true;
  bool sampling = true;
};
void set_decode_kernels(DecodeKernels k);
DecodeKernels decode_kernels();

}  // namespace moerl::model::cuda
