// The GPU code paths of a CUDA build, switched on by the job's configuration (a model or EP
// backend on the GPU) by the library itself, so a program that links moerl without the CLI
// gets what `moerl` gets: this rank takes GPU LOCAL_RANK mod the GPU count, MoE experts run
// as grouped GEMMs, model::generate takes the CUDA-graph decode, and ep::make_group knows the
// cuda_ipc and nccl backends.
//
//   enable_gpu_paths_for(cfg);   // RunContext and the rollout role call it first
// Idempotent and thread-safe; does nothing in a CPU build, with no visible GPU, or when the
// config keeps everything on the CPU.
#pragma once

#include <ATen/Device.h>

#include <cstdint>
#include <string>

#include "job/job_config.h"

namespace moerl::job {

// Unconditionally (a CUDA build with a visible GPU): for commands that take a device flag.
void enable_gpu_paths();
// When cfg places the model on a GPU ([model] device) or names a GPU EP backend.
void enable_gpu_paths_for(const JobConfig& cfg);

// The device a spelling names: "cpu", "cuda" or "cuda:N"; `source` names where the spelling
// came from in the error ("generate: --device", "config: model.device"). check_device_name
// validates the spelling only (configs are rendered on CPU hosts); open_device also requires
// a visible GPU for a CUDA device and switches the GPU paths on. Errors are kInvalidInput.
//   at::Device d = open_device(flag_value, "bench train: --device");
void check_device_name(const std::string& spelling, const std::string& source);
at::Device open_device(const std::string& spelling, const std::string& source);

// The GPU decode step's own kernels on or off (model/cuda/decode_kernels.h): the MoE experts
// at decode sizes, GQA attention, the decode loop's sampling; restore_decode_kernels puts back
// the defaults. False where there is no such choice (a CPU build).
bool set_decode_kernels(bool experts, bool attention, bool sampling);
bool restore_decode_kernels();

// Decode-graph captures that failed in this process (model/cuda/fast_generate.h: those calls
// decoded eagerly); 0 in a CPU build.
int64_t decode_graph_failures();

// Peak bytes held by tensors on the current GPU since the last reset (the CUDA caching
// allocator's allocated_bytes peak, over both pools); -1 in a CPU build or without a GPU.
int64_t gpu_peak_allocated_bytes();
void reset_gpu_peak_allocated();

}  // namespace moerl::job
