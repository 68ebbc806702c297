// The installed page-locking hooks (none in a CPU build).
#include "model/host_pinning.h"

namespace moerl::model {

namespace {
HostPinning g_hooks;
}  // namespace

void set_host_pinning(HostPinning hooks) { g_hooks = hooks; }

bool pin_host_memory(void* p, size_t bytes) { return g_hooks.pin != nullptr && g_hooks.pin(p, bytes); }

void unpin_host_memory(void* p) {
  if (g_hooks.unpin != nullptr) g_hooks.unpin(p);
}

}  // namespace moerl::model
