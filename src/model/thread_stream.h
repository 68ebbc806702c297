// GPU streams for roles that share one GPU inside one process (the in-process rollout workers
// beside the trainer). A worker thread holding a ThreadStream queues its CUDA work on a pool
// stream of its own, which does not synchronise with the default stream the trainer uses: its
// decode kernels can run beside the trainer's, and its device-to-host reads (sampled tokens
// every few steps) wait for its own work only, not for the trainer's queued step.
//
//   model::ThreadStream own(options.model.device);   // for the worker thread's lifetime
//   policy.load_weights(snapshot);                    // tensors the trainer's stream made:
//   model::synchronize_stream(device);                // done with them before dropping them
// The trainer of such a process holds a high-priority one (`ThreadStream(device, true)`): where
// both have kernels waiting, the GPU schedules the trainer's blocks first and decoding fills
// what is left, so a worker that is ahead does not stretch the trainer's step.
// Tensors that cross between streams (weight snapshots) must be complete before the other
// stream reads them: the producer synchronises its stream after writing (WeightHandoff::put),
// the consumer before releasing what it read. On the CPU both are no-ops.
#pragma once

#include <ATen/Device.h>
#include <c10/core/StreamGuard.h>

#include <optional>

namespace moerl::model {

class ThreadStream {
 public:
  explicit ThreadStream(at::Device device, bool high_priority = false);
  ThreadStream(const ThreadStream&) = delete;
  ThreadStream& operator=(const ThreadStream&) = delete;
  bool active() const { return guard_.has_value(); }

 private:
  std::optional<c10::StreamGuard> guard_;
};

// Blocks until the work this thread queued on `device` (its current stream) has finished.
void synchronize_stream(at::Device device);

}  // namespace moerl::model
