// ep::make_group: picks the backend named by Config; GPU backends come from the registry.
#include <map>
#include <mutex>

#include "base/error.h"
#include "ep/ep.h"
#include "ep/torch/fabric_group.h"

namespace moerl::ep {
namespace {

std::mutex registry_mu;
std::map<Backend, GroupFactory>& registry() {
  static std::map<Backend, GroupFactory> r;
  return r;
}

}  // namespace

void register_backend(Backend b, GroupFactory factory) {
  std::lock_guard<std::mutex> lock(registry_mu);
  registry()[b] = factory;
}

std::shared_ptr<Group> make_group(const Config& cfg, int64_t num_experts) {
  switch (cfg.backend) {
    case Backend::kLoopback:
      cfg.validate(num_experts, 1);
      return loopback_group(num_experts);
    case Backend::kFabric:
      return fabric_group(cfg, num_experts);
    case Backend::kAllToAll:
      return alltoall_group(cfg, num_experts);
    case Backend::kCudaIpc:
    case Backend::kNccl:
      break;
  }
  GroupFactory f = nullptr;
  {
    std::lock_guard<std::mutex> lock(registry_mu);
    auto it = registry().find(cfg.backend);
    if (it != registry().end()) f = it->second;
  }
  if (!f) {
    throw Error(std::string("ep: backend ") + backend_name(cfg.backend) + " is not available in this process",
                "it needs a CUDA build (cmake -DMOERL_CUDA=ON) and a visible GPU; on CPUs use fabric or alltoall",
                ErrorCode::kUnavailable);
  }
  return f(cfg, num_experts);
}

}  // namespace moerl::ep
