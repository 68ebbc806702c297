// Installs model::set_host_pinning's CUDA hooks: cudaHostRegister (portable, so every device
// of the process gets the fast path) and cudaHostUnregister.
#pragma once

namespace moerl::model::cuda {

void install_host_pinning();

}  // namespace moerl::model::cuda
