// IpcFlags of ep/cuda/ipc_flags.h: the flag kernels of ep/cuda/signals.h and the host poll
// used where ranks share a GPU.
#include "ep/cuda/ipc_flags.h"

#include <string>
#include <utility>

#include "base/deadline.h"
#include "base/error.h"

namespace moerl::ep::cuda {
namespace {

constexpr uint64_t kPollNs = 20000;  // one GPU wait of a host poll (ranks sharing a GPU)

const char* flag_name(int f) {
  static const char* names[] = {"dispatch rows", "combine rows", "release of its dispatch regions",
                                "release of its combine regions"};
  return f >= 0 && f < IpcFlags::kNumFlags ? names[f] : "?";
}

}  // namespace

void ipc_check(cudaError_t err, int rank, const std::string& what) {
  if (err != cudaSuccess) {
    throw Error("ep cuda_ipc rank " + std::to_string(rank) + ": " + what + ": " + cudaGetErrorString(err),
                "all ranks must run on GPUs of one node with CUDA IPC allowed", ErrorCode::kInternal);
  }
}

size_t IpcFlags::bytes(int num_ranks) {
  const size_t b = static_cast<size_t>(kNumFlags) * num_ranks * sizeof(uint64_t);
  return (b + 4095) / 4096 * 4096;
}

IpcFlags::IpcFlags(int rank, std::vector<uint8_t*> buffers, bool host_polled, double timeout_s)
    : rank_(rank),
      num_ranks_(static_cast<int>(buffers.size())),
      buffers_(std::move(buffers)),
      host_polled_(host_polled),
      timeout_s_(timeout_s) {
  if (num_ranks_ > kMaxFlagPeers) {
    throw Error("ep cuda_ipc: " + std::to_string(num_ranks_) + " ranks, at most " + std::to_string(kMaxFlagPeers) +
                    " share one node's buffers",
                "use the hierarchical backend with cuda_ipc inside nodes of fewer ranks");
  }
  ipc_check(cudaHostAlloc(reinterpret_cast<void**>(&error_), 2 * sizeof(FlagError), cudaHostAllocMapped), rank_,
        "cudaHostAlloc of the error words");
  error_[0] = error_[1] = FlagError{};
}

IpcFlags::~IpcFlags() { cudaFreeHost(error_); }

uint64_t* IpcFlags::flag_at(int buffer, Flag f, int peer) const {
  return reinterpret_cast<uint64_t*>(buffers_[buffer]) + static_cast<size_t>(f) * num_ranks_ + peer;
}

void IpcFlags::signal(Flag f, uint64_t op, cudaStream_t stream) {
  FlagPtrs p{};
  for (int r = 0; r < num_ranks_; ++r) p.ptr[r] = flag_at(r, f, rank_);
  ipc_check(signal_flags(p, num_ranks_, op, stream), rank_, std::string("raising ") + flag_name(f));
}

void IpcFlags::wait(Flag f, uint64_t op, cudaStream_t stream) {
  if (op == 0) return;
  const uint64_t* flags = flag_at(rank_, f, 0);
  const std::string what = std::string("waiting for ") + flag_name(f);
  if (!host_polled_) {
    const auto ns = static_cast<uint64_t>(timeout_s_ * 1e9);
    ipc_check(wait_flags(flags, num_ranks_, op, ns, f, &error_[0], stream), rank_, what);
    return;
  }
  volatile FlagError* poll = &error_[1];
  const Deadline deadline = Deadline::after_seconds(timeout_s_);
  for (;;) {
    poll->flag = 0;
    ipc_check(wait_flags(flags, num_ranks_, op, kPollNs, f, &error_[1], stream), rank_, what);
    ipc_check(cudaStreamSynchronize(stream), rank_, what);
    if (poll->flag == 0) return;
    if (deadline.expired()) break;
  }
  error_[0] = {poll->flag, f};
  check_error();
}

void IpcFlags::check_error() const {
  const volatile FlagError* e = &error_[0];
  if (e->flag == 0) return;
  throw Error("ep cuda_ipc rank " + std::to_string(rank_) + ": rank " + std::to_string(e->flag - 1) + "'s " +
                  flag_name(e->kind) + " did not come within " + std::to_string(timeout_s_) + " s",
              "a peer died or diverged; every rank must make the same dispatch/combine calls", ErrorCode::kTimeout);
}

}  // namespace moerl::ep::cuda
