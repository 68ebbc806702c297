// Data parallelism of an expert-parallel job: every rank holds a replica of the dense
// parameters and 1/R of the experts. This averages gradients (dense: all-reduce mean;
// experts: already summed over all ranks' tokens by the combine/dispatch backward, so
// scaled by 1/R) on the device's collective (GPU gradients: NCCL, registered by a CUDA
// build; host gradients: Gloo), metrics and stop decisions over c10d ProcessGroupGloo,
// rendezvous through the EP TCPStore (MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK).
//
//   std::shared_ptr<DataParallel> dp = DataParallel::join(/*timeout_s=*/120);   // collective
//   loss.backward();
//   double norm = dp->sync_gradients(params, /*max_norm=*/1.0);   // then optimizer.step
//   std::vector<double> m = dp->mean({loss, reward});             // same on every rank
//   gen_cfg.all_done = dp->all_done_fn();                         // lockstep generation
// The metric, flag and byte collectives are ep::ControlGroup's (ep/torch/control_group.h).
//
// Not thread-safe. Collective: every rank makes the same calls in the same order (a rank
// that skips one makes the others fail at the timeout). Failures: moerl::Error naming the
// rank and the operation (dead peer, timeout).
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>

#include "ep/torch/control_group.h"

namespace moerl::train {

class DataParallel : public ep::ControlGroup {
 public:
  // Joins the ranks of this process's rendezvous (WORLD_SIZE of them). Collective.
  static std::shared_ptr<DataParallel> join(double timeout_s);

  // Averages the gradients of `params` as the mean-over-ranks objective needs (dense:
  // all-reduce / R; experts: / R), then clips by the GLOBAL norm (dense once, every rank's
  // experts) exactly as AdamW::clip_grad_norm does on one rank. Returns the norm before
  // clipping. A dense gradient undefined on every rank stays undefined.
  double sync_gradients(const std::map<std::string, at::Tensor>& params, double max_norm);

 private:
  explicit DataParallel(double timeout_s) : ep::ControlGroup("dp", timeout_s) {}
};

}  // namespace moerl::train
