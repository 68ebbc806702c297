// ep::Config validation and the name <-> enum mappings used by flags and TOML.
#include <string>

#include "base/error.h"
#include "ep/ep.h"

namespace moerl::ep {

void Config::validate(int64_t num_experts, int world_size) const {
  auto values = [&] {
    return " (backend=" + std::string(backend_name(backend)) + " mode=" + mode_name(mode) +
           " max_tokens_per_rank=" + std::to_string(max_tokens_per_rank) + " hidden=" + std::to_string(hidden) +
           " max_topk=" + std::to_string(max_topk) + " timeout_s=" + std::to_string(timeout_s) +
           " num_experts=" + std::to_string(num_experts) + " world_size=" + std::to_string(world_size) + ")";
  };
  if (world_size < 1 || num_experts <= 0 || num_experts % world_size != 0) {
    throw Error("ep config: world_size must divide num_experts" + values(),
                "set ep_size (WORLD_SIZE) to a divisor of the number of experts");
  }
  if (backend == Backend::kLoopback && world_size != 1) {
    throw Error("ep config: backend loopback needs exactly one rank" + values(),
                "use backend fabric or alltoall with more than one rank");
  }
  if (max_tokens_per_rank < 1 || hidden < 1 || max_topk < 1 || max_topk > 64) {
    throw Error("ep config: max_tokens_per_rank, hidden must be >= 1 and max_topk in [1, 64]" + values(),
                "fix the [ep] section of the config");
  }
  auto sub_ok = [](std::optional<Backend> b) {
    return !b || (*b != Backend::kLoopback && *b != Backend::kHierarchical);
  };
  if (backend == Backend::kHierarchical && (!sub_ok(intra_backend) || !sub_ok(inter_backend))) {
    throw Error("ep config: hierarchical's intra/inter backends must be multi-rank transports (intra=" +
                    std::string(intra_backend ? backend_name(*intra_backend) : "auto") +
                    " inter=" + backend_name(inter_backend) + ")" + values(),
                "e.g. intra cuda_ipc (GPUs) or fabric (CPU, provider shm), inter fabric");
  }
  if (!(timeout_s > 0)) {
    throw Error("ep config: timeout_s must be > 0" + values(), "e.g. timeout_s = 60");
  }
}

Backend parse_backend(const std::string& s) {
  if (s == "loopback") return Backend::kLoopback;
  if (s == "fabric") return Backend::kFabric;
  if (s == "alltoall") return Backend::kAllToAll;
  if (s == "cuda_ipc") return Backend::kCudaIpc;
  if (s == "nccl") return Backend::kNccl;
  if (s == "hierarchical") return Backend::kHierarchical;
  throw Error("ep: backend '" + s + "' is not one of loopback|fabric|alltoall|cuda_ipc|nccl|hierarchical",
              "e.g. backend = \"fabric\" (cuda_ipc and nccl need a CUDA build and GPUs)");
}

Mode parse_mode(const std::string& s) {
  if (s == "normal") return Mode::kNormal;
  if (s == "low_latency" || s == "low-latency") return Mode::kLowLatency;
  throw Error("ep: mode '" + s + "' is not one of normal|low_latency", "e.g. mode = \"normal\"");
}

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::kLoopback: return "loopback";
    case Backend::kFabric: return "fabric";
    case Backend::kAllToAll: return "alltoall";
    case Backend::kCudaIpc: return "cuda_ipc";
    case Backend::kNccl: return "nccl";
    case Backend::kHierarchical: return "hierarchical";
  }
  return "?";
}

const char* mode_name(Mode m) { return m == Mode::kNormal ? "normal" : "low_latency"; }

}  // namespace moerl::ep
