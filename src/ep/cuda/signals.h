// Completion flags between ranks that map each other's device memory (ep/cuda/cuda_ipc_group):
// a writer raises a peer's flag after its writes, a reader's stream waits on its own flags on
// the GPU. Flags are uint64 sequence numbers that only grow, so a flag never needs resetting.
//
//   signal_flags(peer_flag_ptrs, n, seq, stream);   // after this stream's writes into the peers
//   wait_flags(my_flags, n, seq, timeout_ns, err, stream);  // later work on the stream sees their writes
//
// Both only enqueue work on `stream` and return the launch status. A wait that outlives its
// deadline stops waiting and records the first such flag in `err` (host memory mapped for the
// device: cudaHostAlloc with cudaHostAllocMapped), which the host reads without a sync.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace moerl::ep::cuda {

constexpr int kMaxFlagPeers = 64;

// Where a wait that timed out is recorded: `flag` = index + 1 of the first late flag (0: none),
// `kind` = the caller's label for the wait.
struct FlagError {
  int32_t flag = 0;
  int32_t kind = 0;
};

struct FlagPtrs {
  uint64_t* ptr[kMaxFlagPeers];
};

// For i < n: after every earlier write of this stream is visible system-wide, *flags.ptr[i] = value.
cudaError_t signal_flags(const FlagPtrs& flags, int n, uint64_t value, cudaStream_t stream);
// Waits until flags[i] >= value for every i < n, or until timeout_ns have passed (then records
// {i + 1, kind} in *err unless an earlier error is there, and returns).
cudaError_t wait_flags(const uint64_t* flags, int n, uint64_t value, uint64_t timeout_ns, int32_t kind,
                       FlagError* err, cudaStream_t stream);

}  // namespace moerl::ep::cuda
