// `--device cpu|cuda[:N]` and `--dtype float32|bfloat16` of the commands that run a model
// (forward, generate): the model options they describe. A GPU device switches the GPU code
// paths on (job/gpu_paths.h: grouped-GEMM experts, the CUDA-graph decode in generate()).
//
//   model::ModelOptions mo = model_flags(args, "generate");  // before args.finish()
// Defaults: cpu, float32 (the commands' contract before the flags existed). Errors name the
// flag: an unknown device or dtype, a GPU device in a CPU build or without a visible GPU.
#pragma once

#include "cli/args.h"
#include "model/model.h"

namespace moerl::cli {

model::ModelOptions model_flags(Args& args, const std::string& command);

}  // namespace moerl::cli
