// GPU setup of the `moerl` binary: with MOERL_CUDA builds and a visible GPU, the MoE blocks
// run their experts as grouped GEMMs and generate() takes the CUDA-graph decode path; CPU
// builds do nothing here, and the same commands run on the CPU.
#include "cli/command.h"

#ifdef MOERL_WITH_CUDA
#include <ATen/Context.h>

#include "model/cuda/fast_generate.h"
#include "model/cuda/moe_gpu.h"
#endif

namespace moerl::cli {

void init_gpu() {
#ifdef MOERL_WITH_CUDA
  if (at::hasCUDA()) {
    model::cuda::install_cuda_experts();
    model::cuda::install_fast_generate();
  }
#endif
}

}  // namespace moerl::cli
