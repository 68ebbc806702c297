// `moerl bench ep`: flags -> ep::BenchOptions; rank 0 prints the table (or one JSON object).
#include <cstdio>
#include <sstream>

#include "base/dtype.h"
#include "base/env.h"
#include "base/error.h"
#include "cli/bench.h"
#include "ep/bench.h"
#include "job/gpu_paths.h"

namespace moerl::cli {

static int run_bench_ep(Args& a) {
  if (a.flag("--help") || a.flag("-h")) {
    std::printf(
        "usage: moerl launch -n N -- moerl bench ep [--tokens 4096] [--hidden 2048] [--topk 8] [--experts 64]\n"
        "         [--dtype bf16|fp32 (or bfloat16, float32, f32)] [--routing uniform|zipf|one-expert|dropped] [--mode normal|low-latency]\n"
        "         [--backend fabric,alltoall,hierarchical] [--provider shm|tcp|efa] [--warmup 3] [--iters 10] [--seed 1] [--json]\n"
        "         [--device cpu|cuda]   (cuda: --backend cuda_ipc,nccl, one GPU per rank)\n"
        "hierarchical: nodes of LOCAL_WORLD_SIZE ranks; intra-node hop fabric/shm (cuda_ipc on GPUs), inter-node\n"
        "hop fabric over --provider (else FI_PROVIDER, else tcp); ratio = fabric/hierarchical when both run.\n"
        "Verifies every backend against a reference, then reports median dispatch/combine times, GB/s of\n"
        "received bytes, copy bandwidth, and ratio = baseline time / ours (alltoall/fabric, nccl/cuda_ipc,\n"
        "fabric/hierarchical).\n"
        "Exit 1 on a wrong result.\n");
    return 0;
  }
  ep::BenchOptions o;
  o.tokens = a.integer("--tokens", o.tokens);
  o.hidden = a.integer("--hidden", o.hidden);
  o.topk = a.integer("--topk", o.topk);
  o.experts = a.integer("--experts", o.experts);
  o.dtype = parse_dtype(a.value_or("--dtype", "bf16"), "--dtype", {DType::kBFloat16, DType::kFloat32});
  o.routing = a.value_or("--routing", o.routing);
  o.mode = ep::parse_mode(a.value_or("--mode", "normal"));
  o.provider = a.value_or("--provider", "");
  o.device = a.value_or("--device", o.device);
  if (o.device == "cuda") job::enable_gpu_paths();  // the cuda_ipc and nccl backends
  o.warmup = static_cast<int>(a.integer("--warmup", o.warmup));
  o.iters = static_cast<int>(a.integer("--iters", o.iters));
  o.seed = static_cast<uint64_t>(a.integer("--seed", 1));
  o.timeout_s = a.number("--timeout", o.timeout_s);
  const bool json = a.flag("--json");
  std::string backends = a.value_or("--backend", o.device == "cuda" ? "cuda_ipc,nccl" : "fabric,alltoall");
  a.finish();
  o.backends.clear();
  std::stringstream ss(backends);
  for (std::string b; std::getline(ss, b, ',');) o.backends.push_back(ep::parse_backend(b));
  nlohmann::json r = ep::run_bench(o);
  if (env::rendezvous().rank == 0) {
    if (json) std::printf("%s\n", r.dump().c_str());
    else std::printf("%s", ep::bench_table(r).c_str());
  }
  return 0;
}

MOERL_BENCH("ep", "expert-parallel dispatch/combine: fabric vs all-to-all baseline", run_bench_ep);

}  // namespace moerl::cli
