// reset_namespace: one Lua script deletes the run-state keys of a namespace and names the
// ones that existed.
#include "runtime/namespace_reset.h"

#include "runtime/redis_client.h"
#include "runtime/redis_queue.h"
#include "runtime/runtime_config.h"
#include "runtime/trainer_lease.h"

namespace moerl::runtime {
namespace {

// KEYS: the keys to remove. Returns those that existed.
constexpr const char* kRemoveScript = R"lua(
local removed = {}
for _, k in ipairs(KEYS) do
  if redis.call('DEL', k) == 1 then removed[#removed + 1] = k end
end
return removed
)lua";

}  // namespace

NamespaceReset reset_namespace(const RuntimeConfig& config, TrainerLease& lease, Deadline deadline) {
  if (config.backend() != BackendKind::kRedis) return {};
  // NOTE: throws unless this trainer holds the namespace; the lease cannot change hands
  // between here and the script, which runs within the lease's TTL.
  lease.check(deadline);
  const std::vector<std::string> keys = RedisKeys(config.ns).run_state();
  std::vector<std::string> argv = {"EVAL", kRemoveScript, std::to_string(keys.size())};
  argv.insert(argv.end(), keys.begin(), keys.end());
  RedisClient client(config.redis_url());
  NamespaceReset out;
  for (const RedisReply& k : client.command_ok(argv, deadline).elements) out.removed.push_back(k.str);
  return out;
}

}  // namespace moerl::runtime
