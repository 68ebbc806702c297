// ep::make_group: picks the backend named by Config.
#include "base/error.h"
#include "ep/ep.h"
#include "ep/torch/fabric_group.h"

namespace moerl::ep {

std::shared_ptr<Group> make_group(const Config& cfg, int64_t num_experts) {
  switch (cfg.backend) {
    case Backend::kLoopback:
      cfg.validate(num_experts, 1);
      return loopback_group(num_experts);
    case Backend::kFabric:
      return fabric_group(cfg, num_experts);
    case Backend::kAllToAll:
      return alltoall_group(cfg, num_experts);
  }
  throw Error("ep: unknown backend", "use loopback, fabric or alltoall", ErrorCode::kInternal);
}

}  // namespace moerl::ep
