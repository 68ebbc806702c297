// The ranks of one rollout instance: M processes (one per GPU under `moerl launch`), each
// holding 1/M of the experts, generating in lockstep, that act toward the queue as ONE
// rollout worker: one worker id, one lease at a time, one drain. Rank 0, the leader, runs
// the worker loop (runtime/worker_loop.h) and alone talks to the queue and the buffer. Each
// turn of its loop it sends the other ranks (followers) one message, and every message is
// followed by one agreement that all ranks take part in:
//   kIdle   nothing leased (a heartbeat, at least once per lease poll)  -> agree
//   kBatch  the leased task units and the batch index -> agree -> (activate) -> generate
//           each rank's share of the units -> the records gathered to the leader
//   kStop   the leader's loop has ended: followers return
// The agreement says whether any rank is draining (SIGTERM, a Spot notice, the run's end:
// then the whole instance drains) and which weight version each rank has staged: a version is
// activated only once every rank has it, so a forward pass never mixes versions across ranks.
//
//   InstanceLink link(group);                       // group: ep::ControlGroup of the instance
//   leader:   link.send({.command = kBatch, .batch = n, .units = units});
//   follower: InstanceMessage m = link.receive();
//   InstanceAgreement a = link.agree(drain.state() != kRunning, staged_version);
//   std::vector<ExperienceRecord> all = link.collect(generate(link.share(m.units)), m.units.size());
// Not thread-safe: the worker thread of each rank drives it. Collective (ep::ControlGroup);
// a dead rank makes the others fail within the group's timeout with a moerl::Error.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ep/torch/control_group.h"
#include "runtime/records.h"

namespace moerl::rollout {

enum class InstanceCommand : uint8_t { kIdle = 0, kBatch = 1, kStop = 2 };

struct InstanceMessage {
  InstanceCommand command = InstanceCommand::kIdle;
  uint64_t batch = 0;                     // the leader's batch count: every rank's sampling seed
  std::vector<runtime::TaskUnit> units;   // kBatch: the leased units, in lease order
};

std::string encode_instance_message(const InstanceMessage& m);
InstanceMessage decode_instance_message(std::string_view bytes);

struct InstanceAgreement {
  bool draining = false;      // some rank is draining: every rank drains
  uint64_t staged_min = 0;    // the lowest and highest weight version staged on a rank
  uint64_t staged_max = 0;
  // The version every rank has staged, or 0 when they differ.
  uint64_t common_staged() const { return staged_min == staged_max ? staged_min : 0; }
};

class InstanceLink {
 public:
  explicit InstanceLink(std::shared_ptr<ep::ControlGroup> group);

  int rank() const { return group_->rank(); }
  int size() const { return group_->world_size(); }
  bool leader() const { return group_->lead(); }
  ep::ControlGroup& group() { return *group_; }

  void send(const InstanceMessage& m);  // leader
  InstanceMessage receive();            // followers: the leader's next message
  InstanceAgreement agree(bool draining, uint64_t staged_version);
  // The units this rank generates: unit i goes to rank i mod size() (a group never splits).
  std::vector<runtime::TaskUnit> share(const std::vector<runtime::TaskUnit>& units) const;
  // Every rank's records of its share, to the leader in the batch's unit order (followers get
  // an empty vector). `num_units` is the batch's size.
  std::vector<runtime::ExperienceRecord> collect(const std::vector<runtime::ExperienceRecord>& mine,
                                                 size_t num_units);

 private:
  std::shared_ptr<ep::ControlGroup> group_;
};

// The lockstep of one generate() call over an instance's ranks (model::GenerateConfig's
// all_done and cancel): one collective per decode step agrees both whether every rank's rows
// are finished and whether any rank must abandon the batch (its drain deadline is near), so
// every rank stops at the same step.
class LockstepGeneration {
 public:
  // `local_abort`: this rank's wish to abandon (asked once per decode step).
  LockstepGeneration(ep::ControlGroup& group, std::function<bool()> local_abort);
  bool all_done(bool local_done);
  // The abort agreed at the last all_done (false before the first).
  bool cancel() const { return abort_; }

 private:
  ep::ControlGroup& group_;
  std::function<bool()> local_abort_;
  bool abort_ = false;
};

}  // namespace moerl::rollout
