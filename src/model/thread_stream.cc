// A pool stream per worker thread on a shared GPU; device-generic through c10's guard
// interface, so the CPU build compiles it without CUDA headers.
#include "model/thread_stream.h"

#include <c10/core/impl/VirtualGuardImpl.h>

namespace moerl::model {

ThreadStream::ThreadStream(at::Device device) {
  if (!device.is_cuda()) return;
  c10::impl::VirtualGuardImpl impl(device.type());
  const at::Device d = device.has_index() ? device : at::Device(device.type(), impl.getDevice().index());
  guard_.emplace(impl.getStreamFromGlobalPool(d));
}

void synchronize_stream(at::Device device) {
  if (!device.is_cuda()) return;
  c10::impl::VirtualGuardImpl impl(device.type());
  const at::Device d = device.has_index() ? device : at::Device(device.type(), impl.getDevice().index());
  impl.getStream(d).synchronize();
}

}  // namespace moerl::model
