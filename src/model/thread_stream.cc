// A pool stream per worker thread on a shared GPU; device-generic through c10's guard
// interface, so the CPU build compiles it without CUDA headers.
#include "model/thread_stream.h"

#include <c10/core/impl/VirtualGuardImpl.h>

namespace moerl::model {

namespace {

// "cuda" names this thread's current device.
at::Device indexed(const c10::impl::VirtualGuardImpl& impl, at::Device device) {
  return device.has_index() ? device : at::Device(device.type(), impl.getDevice().index());
}

}  // namespace

ThreadStream::ThreadStream(at::Device device, bool high_priority) {
  if (!device.is_cuda()) return;
  c10::impl::VirtualGuardImpl impl(device.type());
  guard_.emplace(impl.getStreamFromGlobalPool(indexed(impl, device), high_priority));
}

void synchronize_stream(at::Device device) {
  if (!device.is_cuda()) return;
  c10::impl::VirtualGuardImpl impl(device.type());
  impl.getStream(indexed(impl, device)).synchronize();
}

}  // namespace moerl::model
