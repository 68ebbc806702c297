// ExperienceSource: where the trainer loop (job/trainer_loop.h) gets each RL step's prompt
// groups. Two implementations: InlineSource (sync: the trainer generates them itself, in line)
// and QueueSource (async: rollout workers generate them from a task queue, the trainer takes
// fresh-enough records from the experience buffer and publishes weight versions). The loop is
// the same for both; only this interface differs.
//
//   for (int64_t step = 1; ...; ++step) {
//     StepExperience e = source.next_batch();      // empty records: the source is exhausted
//     train(e.records); state.policy_version++;
//     source.after_step(e);                         // publish weights, log what was trained
//   }
// A source lives in one RunContext and reads and updates its state (cursor, policy version).
// Not thread-safe: the trainer thread calls it. Failures: moerl::Error.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/records.h"

namespace moerl::job {

struct StepExperience {
  std::vector<runtime::ExperienceRecord> records;  // prompt groups to train (this rank's share), group_size samples each
  // Generation behind this step, for the rollout rate: tokens generated (sync: every round,
  // filtered groups included) and the seconds spent generating them. A trainer group's loop
  // sums both over its ranks: sync ranks report their own tokens and 1/R of the lockstep
  // generation time; the async source reports the whole batch's on rank 0 (0 elsewhere).
  int64_t generated_tokens = 0;
  double generate_seconds = 0;
  nlohmann::json row = nlohmann::json::object();  // the source's fields of the step's metrics row
};

class ExperienceSource {
 public:
  virtual ~ExperienceSource() = default;
  virtual const char* mode() const = 0;  // "sync" | "async" (summary.json)
  // Once before the first RL step of this process (after SFT, the evaluation and the KL
  // anchor), with the state restored from a checkpoint if there was one.
  virtual void start() = 0;
  // The next step's experience; empty records when nothing more can come.
  virtual StepExperience next_batch() = 0;
  // After the step trained (state.rl_step and state.policy_version advanced).
  virtual void after_step(StepExperience& step) {}
  // The source's state for a checkpoint (restored by start()), and the notice that the
  // checkpoint holding it is committed.
  virtual nlohmann::json snapshot() { return nullptr; }
  virtual void checkpoint_committed() {}
  // After the last RL step, before the final checkpoint: the run is over.
  virtual void finish() {}
  // The source's fields of summary.json.
  virtual void add_summary(nlohmann::json& summary) {}
  // Extra panels of plot.png besides reward, loss, grad_norm and response_len.
  virtual std::vector<std::string> plot_panels() const { return {}; }
};

}  // namespace moerl::job
