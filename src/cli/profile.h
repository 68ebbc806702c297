// Kernel profile of one region of a benchmark (PyTorch's Kineto profiler): the Chrome trace is
// written to a file (open it in Perfetto or chrome://tracing) and the GPU kernels and copies are
// summed by name, largest first, for `moerl bench gen|train --profile PATH`.
//
//   nlohmann::json p = profile_region("step.trace.json", [&] { trainer.train_step(batch); sync(); });
//   // {"trace": "step.trace.json", "wall_ms": 812.4, "gpu_busy_ms": 640.2, "top": [{"name": ..,
//   //   "ms": .., "calls": .., "share": ..}, ...]}
// Throws Error naming the path when the trace cannot be written or read back, and when this
// libtorch lacks Kineto (Debian's CPU build: no trace at all). A run without device events (no
// GPU) says so in the summary.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace moerl::cli {

nlohmann::json profile_region(const std::string& trace_path, const std::function<void()>& body, int top = 40);

}  // namespace moerl::cli
