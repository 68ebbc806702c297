// `moerl bench ep`: times dispatch + combine for each EP backend on the same routed
// inputs, after verifying every result exactly against a plain recomputation, and
// measures memcpy bandwidth in the same run as the physical ceiling. Run it on every
// rank (under `moerl launch -n N`); collective.
//
//   ep::BenchOptions o;  o.tokens = 4096;  o.backends = {Backend::kFabric, Backend::kAllToAll};
//   nlohmann::json r = ep::run_bench(o);   // rank 0: r["ratio"] = alltoall / fabric time
//
// On GPUs (o.device = "cuda"): backends cuda_ipc and nccl, ratio = nccl / cuda_ipc time, and
// the copy bandwidth is the GPU's device-to-device copy.
//
// Throws moerl::Error (kInternal) when a backend's result differs from the reference.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "base/dtype.h"
#include "ep/ep.h"

namespace moerl::ep {

struct BenchOptions {
  int64_t tokens = 4096, hidden = 2048, topk = 8, experts = 64;
  DType dtype = DType::kBFloat16;   // bfloat16 | float32 (base/dtype.h spellings)
  std::string routing = "uniform";  // uniform | zipf | one-expert | dropped
  Mode mode = Mode::kNormal;
  std::vector<Backend> backends = {Backend::kFabric, Backend::kAllToAll};
  std::string provider;             // fabric provider; empty: FI_PROVIDER, else shm
  std::string device = "cpu";       // cpu | cuda (this rank's current GPU; cuda_ipc, nccl)
  int warmup = 3, iters = 10;
  uint64_t seed = 1;
  double timeout_s = 120;
};

nlohmann::json run_bench(const BenchOptions& o);
// Human-readable table of run_bench's result.
std::string bench_table(const nlohmann::json& r);

}  // namespace moerl::ep
