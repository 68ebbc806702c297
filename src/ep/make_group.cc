// ep::make_group: picks the backend named by Config; GPU backends come from the registry.
// make_group_in: the same over a joined sub-world (the hops of a hierarchical group).
#include <map>
#include <mutex>

#include "base/error.h"
#include "ep/ep.h"
#include "ep/hier/hier_group.h"
#include "ep/torch/fabric_group.h"
#include "ep/torch/world.h"

namespace moerl::ep {
namespace {

std::mutex registry_mu;
std::map<Backend, GroupFactory>& registry() {
  static std::map<Backend, GroupFactory> r;
  return r;
}
std::map<Backend, detail::WorldGroupFactory>& world_registry() {
  static std::map<Backend, detail::WorldGroupFactory> r;
  return r;
}

}  // namespace

void register_backend(Backend b, GroupFactory factory) {
  std::lock_guard<std::mutex> lock(registry_mu);
  registry()[b] = factory;
}

namespace detail {

void register_world_backend(Backend b, WorldGroupFactory factory) {
  std::lock_guard<std::mutex> lock(registry_mu);
  world_registry()[b] = factory;
}

bool has_world_backend(Backend b) {
  if (b == Backend::kFabric || b == Backend::kAllToAll) return true;
  std::lock_guard<std::mutex> lock(registry_mu);
  return world_registry().count(b) > 0;
}

std::shared_ptr<Group> make_group_in(const Config& cfg, int64_t num_experts, const World& world) {
  if (cfg.backend == Backend::kFabric) return fabric_group_in(cfg, num_experts, world);
  if (cfg.backend == Backend::kAllToAll) return alltoall_group_in(cfg, num_experts, world);
  WorldGroupFactory f = nullptr;
  {
    std::lock_guard<std::mutex> lock(registry_mu);
    auto it = world_registry().find(cfg.backend);
    if (it != world_registry().end()) f = it->second;
  }
  if (!f) {
    throw Error(std::string("ep: backend ") + backend_name(cfg.backend) + " cannot be a hop of a hierarchical group here",
                "hops are fabric or alltoall, or cuda_ipc/nccl in a CUDA build with a visible GPU",
                ErrorCode::kUnavailable);
  }
  return f(cfg, num_experts, world);
}

}  // namespace detail

std::shared_ptr<Group> make_group(const Config& cfg, int64_t num_experts) {
  switch (cfg.backend) {
    case Backend::kLoopback:
      cfg.validate(num_experts, 1);
      return loopback_group(num_experts);
    case Backend::kFabric:
      return fabric_group(cfg, num_experts);
    case Backend::kAllToAll:
      return alltoall_group(cfg, num_experts);
    case Backend::kHierarchical:
      return hierarchical_group(cfg, num_experts);
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
