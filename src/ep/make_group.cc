// ep::make_group: picks the backend named by Config.
#include "base/error.h"
#include "ep/ep.h"

namespace moerl::ep {

std::shared_ptr<Group> make_group(const Config& cfg, int64_t num_experts) {
  if (cfg.backend == Backend::kLoopback) {
    cfg.validate(num_experts, 1);
    return loopback_group(num_experts);
  }
  throw Error(std::string("ep: backend ") + backend_name(cfg.backend) + " is not built yet in this commit",
              "use backend loopback");
}

}  // namespace moerl::ep
