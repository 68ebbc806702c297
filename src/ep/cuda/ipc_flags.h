// The completion flags of a cuda_ipc group (ep/cuda/cuda_ipc_group.cc), in front of every
// rank's mapped buffer: uint64 operation numbers, one per peer and kind, that only grow.
//   kRowsIn[s]   s's dispatch rows and metadata are here       (raised by s after writing)
//   kBackIn[s]   s's combine rows are here                     (raised by s after writing)
//   kRowsFree[d] d has read what we last dispatched into it     (raised by d after reading)
//   kBackFree[s] s has read what we last combined into it       (raised by s after reading)
// A writer waits for the "free" flag of the previous operation before it writes again.
//
//   IpcFlags flags(rank, buffers, host_polled, timeout_s);  // buffers[r]: rank r's, mapped here
//   flags.signal(IpcFlags::kRowsIn, op, stream);            // after our writes into every peer
//   flags.wait(IpcFlags::kRowsIn, op, stream);              // later work sees every peer's
//
// Waits run on the GPU (a kernel polls our flags; its deadline records the first late peer in
// mapped host memory, and check_error() throws it), except where a peer shares our GPU: a
// spinning kernel then holds the GPU for its time slice while the peer's kernels wait for
// theirs, so the host polls with short GPU waits instead. Thread-safety: one thread.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ep/cuda/signals.h"

namespace moerl::ep::cuda {

// Throws moerl::Error naming the rank and `what` unless err is cudaSuccess (cuda_ipc's CUDA calls).
void ipc_check(cudaError_t err, int rank, const std::string& what);

class IpcFlags {
 public:
  enum Flag : int { kRowsIn = 0, kBackIn, kRowsFree, kBackFree, kNumFlags };
  // Bytes the flags take at the start of each buffer (page-aligned, so what follows is too).
  static size_t bytes(int num_ranks);

  // host_polled: wait by polling from the host (ranks sharing a GPU), else with a GPU kernel.
  IpcFlags(int rank, std::vector<uint8_t*> buffers, bool host_polled, double timeout_s);
  ~IpcFlags();
  IpcFlags(const IpcFlags&) = delete;
  IpcFlags& operator=(const IpcFlags&) = delete;

  // Raises flag f for this rank in every rank's buffer, after this stream's earlier writes.
  void signal(Flag f, uint64_t op, cudaStream_t stream);
  // Later work on `stream` starts once every rank has raised our flag f to op (0: no wait).
  void wait(Flag f, uint64_t op, cudaStream_t stream);
  // Throws moerl::Error (kTimeout) naming the first peer whose flag came late.
  void check_error() const;

 private:
  uint64_t* flag_at(int buffer, Flag f, int peer) const;
  const int rank_, num_ranks_;
  const std::vector<uint8_t*> buffers_;
  const bool host_polled_;
  const double timeout_s_;
  FlagError* error_ = nullptr;  // mapped host memory: [0] the first late flag (sticky), [1] one poll's
};

}  // namespace moerl::ep::cuda
