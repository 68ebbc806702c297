// Data parallelism of an expert-parallel job: every rank holds a replica of the dense
// parameters and 1/R of the experts. This averages gradients (dense: all-reduce mean;
// experts: already summed over all ranks' tokens by the combine/dispatch backward, so
// scaled by 1/R), metrics and stop decisions over c10d ProcessGroupGloo, rendezvous
// through the EP TCPStore (MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK).
//
//   std::shared_ptr<DataParallel> dp = DataParallel::join(/*timeout_s=*/120);   // collective
//   loss.backward();
//   double norm = dp->sync_gradients(params, /*max_norm=*/1.0);   // then optimizer.step
//   std::vector<double> m = dp->mean({loss, reward});             // same on every rank
//   gen_cfg.all_done = dp->all_done_fn();                         // lockstep generation
//
// Not thread-safe. Collective: every rank makes the same calls in the same order (a rank
// that skips one makes the others fail at the timeout). Failures: moerl::Error naming the
// rank and the operation (dead peer, timeout).
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace moerl::train {

// True for routed-expert parameters ("...mlp.experts.<e>...."): the ones an EP rank shards.
bool is_expert_param(const std::string& name);

class DataParallel {
 public:
  // Joins the ranks of this process's rendezvous (WORLD_SIZE of them). Collective.
  static std::shared_ptr<DataParallel> join(double timeout_s);
  ~DataParallel();

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

  // Averages the gradients of `params` as the mean-over-ranks objective needs (dense:
  // all-reduce / R; experts: / R), then clips by the GLOBAL norm (dense once, every rank's
  // experts) exactly as AdamW::clip_grad_norm does on one rank. Returns the norm before
  // clipping. A dense gradient undefined on every rank stays undefined.
  double sync_gradients(const std::map<std::string, at::Tensor>& params, double max_norm);

  std::vector<double> sum(const std::vector<double>& values);
  std::vector<double> mean(const std::vector<double>& values);
  // True when `local` is true on every rank.
  bool all(bool local);
  // all() as a function, for model::GenerateConfig::all_done.
  std::function<bool(bool)> all_done_fn();
  void barrier(const std::string& what);
  // Rank 0 gets every rank's string (index = rank); other ranks get an empty vector.
  std::vector<std::string> gather(const std::string& value);
  // Rank 0's value, on every rank.
  std::string broadcast(const std::string& value);

 private:
  struct Impl;
  DataParallel(int rank, int world_size, std::unique_ptr<Impl> impl);
  void allreduce(at::Tensor& t, const char* what);

  int rank_;
  int world_size_;
  std::unique_ptr<Impl> impl_;
  int64_t seq_ = 0;  // numbers gather/broadcast keys; advances identically on every rank
};

}  // namespace moerl::train
