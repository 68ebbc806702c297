// libfabric RDM endpoint for EP: one registered buffer allocated at construction and
// reused for every message; tagged sends/receives; completions counted per operation
// and per peer (never inferred from ordering). Raw pointers only, no at::Tensor.
//
//   FabricEndpoint ep({.provider = "shm", .rank = r, .world_size = n, .buffer_bytes = b,
//                      .timeout_s = 60}, allgather_names);
//   ep.post_recv(peer, offset, bytes, tag);
//   ep.post_send(peer, ep.buffer() + off, bytes, tag);
//   ep.wait_all("dispatch");   // throws moerl::Error(kTimeout) naming rank, peers, what
//
// Thread-safety: one thread at a time. Failure: provider errors and timeouts throw
// moerl::Error; the endpoint is unusable afterwards.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace moerl::ep {

class ShmRegionLock;

class FabricEndpoint {
 public:
  struct Options {
    std::string provider;  // "shm", "tcp" (tcp;ofi_rxm), "efa", ...
    int rank = 0;
    int world_size = 1;
    size_t buffer_bytes = 0;
    double timeout_s = 60;
  };
  // Publishes this endpoint's address and returns every rank's address, in rank order.
  using AllGather = std::function<std::vector<std::string>(const std::string& mine)>;

  FabricEndpoint(const Options& opts, const AllGather& allgather);
  ~FabricEndpoint();
  FabricEndpoint(const FabricEndpoint&) = delete;
  FabricEndpoint& operator=(const FabricEndpoint&) = delete;

  uint8_t* buffer() const { return buffer_; }
  size_t buffer_bytes() const { return opts_.buffer_bytes; }
  // True when sends may come straight from unregistered user memory (no FI_MR_LOCAL).
  bool sends_from_user_memory() const { return !needs_local_mr_; }
  const std::string& provider_name() const { return provider_name_; }

  // Starts one operation (a dispatch or combine): its single deadline (timeout_s from
  // now) bounds every post and the wait; `what` names it in errors.
  void begin(const std::string& what);
  // Receive the message tagged `tag` into buffer()[offset, offset+bytes).
  void post_recv(int peer, size_t offset, size_t bytes, uint64_t tag);
  // Send up to two pieces as one message; each piece lies in buffer() or, when
  // sends_from_user_memory(), anywhere. Pieces must stay unchanged until wait_all.
  void post_send(int peer, const void* a, size_t a_bytes, uint64_t tag, const void* b = nullptr,
                 size_t b_bytes = 0);
  // Drives the completion queue until every posted operation completed. On deadline:
  // Error naming this rank, each peer still owing a message, and the operation.
  void wait_all();
  // Bytes of the last completed receive from `peer`.
  size_t received_bytes(int peer) const;

 private:
  struct Op;
  void progress();
  void* desc_for(const void* p) const;
  [[noreturn]] void post_timed_out(const char* verb, int peer) const;
  std::string what_;
  double deadline_at_ = 0;  // now_seconds() value ending the current operation
  Options opts_;
  std::string provider_name_;
  bool needs_local_mr_ = false;
  uint8_t* buffer_ = nullptr;
  struct Fi;
  std::unique_ptr<Fi> fi_;
  std::unique_ptr<ShmRegionLock> region_lock_;  // shm provider: held while the region lives
  std::vector<std::unique_ptr<Op>> ops_;  // posted, not yet reaped
  size_t num_pending_ = 0;
  std::vector<size_t> recv_len_;
};

}  // namespace moerl::ep
