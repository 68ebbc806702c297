// ControlGroup: host-side collectives among the ranks of one role (a trainer group, a rollout
// instance) for control and metadata, not tensors of the model: numbers summed or maxed over
// ranks, flags agreed, bytes broadcast from / scattered by / gathered to rank 0, and "rank 0
// decides" calls whose result or error reaches every rank. c10d ProcessGroupGloo, joined
// through the EP rendezvous (MASTER_ADDR/PORT, WORLD_SIZE, RANK; ep/torch/world.h).
//
//   std::shared_ptr<ControlGroup> g = ControlGroup::join("instance", /*timeout_s=*/120);
//   bool stop = g->any(local_drain_requested);                  // same answer on every rank
//   std::string part = g->scatter(g->lead() ? parts : {});      // rank r gets parts[r]
//   std::string v = g->lead_runs("publish", [&] { return std::to_string(publish()); });
//
// Not thread-safe. Collective: every rank makes the same calls in the same order; a call
// waits at most timeout_s for its peers. Failures: moerl::Error naming the rank and the call
// (a dead or hung peer, or one that made another sequence of calls).
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace moerl::ep {

namespace detail {
struct World;
}  // namespace detail

// The collective a GPU build registers for tensors on the device (NCCL; job/gpu_paths): a
// factory called once per group, on first use, over the group's rendezvous (a key space of
// its own), returning an in-place SUM all-reduce. Null: CUDA tensors go through host memory.
using DeviceAllReduce = std::function<void(at::Tensor&)>;
using DeviceAllReduceFactory = std::function<DeviceAllReduce(const detail::World& world, double timeout_s)>;
void register_device_allreduce(DeviceAllReduceFactory factory);

class ControlGroup {
 public:
  // Joins the launch's ranks (WORLD_SIZE of them) as a group of kind `kind`. Collective.
  static std::shared_ptr<ControlGroup> join(const std::string& kind, double timeout_s);
  virtual ~ControlGroup();
  ControlGroup(const ControlGroup&) = delete;
  ControlGroup& operator=(const ControlGroup&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  bool lead() const { return rank_ == 0; }

  std::vector<double> sum(const std::vector<double>& values);
  std::vector<double> mean(const std::vector<double>& values);
  std::vector<double> max(const std::vector<double>& values);
  bool all(bool local);  // true when `local` is true on every rank
  bool any(bool local);  // true when `local` is true on some rank
  // all() as a function, for model::GenerateConfig::all_done.
  std::function<bool(bool)> all_done_fn();
  void barrier(const std::string& what);
  // How many allreduce_tensor calls went through the device collective.
  int64_t device_allreduces() const;

  // Rank 0's `value` on every rank (the others' argument is ignored).
  std::string broadcast(const std::string& value);
  // Rank 0 gets every rank's `value` (index = rank); the other ranks get an empty vector.
  std::vector<std::string> gather(const std::string& value);
  // Rank r gets rank 0's values[r]; rank 0 passes world_size() values, the others none.
  std::string scatter(const std::vector<std::string>& values);
  // Rank 0 runs `fn`; every rank returns its result. If fn throws, rank 0 rethrows it and the
  // other ranks throw a moerl::Error carrying its message, so no rank waits for a peer that
  // gave up. `what` names the call in errors.
  std::string lead_runs(const std::string& what, const std::function<std::string()>& fn);
  // The same for work of unbounded length on rank 0 (waiting for experience, say): fn gets
  // `beat`, which it calls at least once per timeout while it works; the other ranks wait
  // beat by beat, so only a rank 0 that stops beating (dead or hung) fails them.
  using Beat = std::function<void()>;
  std::string lead_runs(const std::string& what, const std::function<std::string(const Beat& beat)>& fn);

 protected:
  ControlGroup(const std::string& kind, double timeout_s);
  // In-place SUM (or MAX) all-reduce of a host tensor; `what` names it in errors.
  void allreduce(at::Tensor& t, const char* what, bool max = false);
  // In-place SUM all-reduce of a tensor where it lives: a CUDA tensor through the registered
  // device collective (the group's communicator is made on the first such call, on every
  // rank), a host tensor through Gloo; without a device collective a CUDA tensor makes a
  // round trip through host memory. One rank: nothing to do.
  void allreduce_tensor(at::Tensor& t, const char* what);

 private:
  struct Impl;
  // Runs one collective, turning a failure into moerl::Error naming `what`.
  void collective(const char* what, const std::function<void()>& fn);

  int rank_ = 0;
  int world_size_ = 1;
  std::unique_ptr<Impl> impl_;
};

}  // namespace moerl::ep
