// InlineSource: the sync job's experience. The trainer generates each step's prompt groups
// itself with the current policy (rollout::GroupRollout), prompts_per_step of them from the
// data cursor; under expert parallelism each rank generates its share (rank r takes prompts
// r, r+R, ...; a group stays on one rank) in lockstep. With dynamic sampling (DAPO), groups
// whose rewards are all equal are set aside and more rounds are drawn, sized by the fraction
// kept so far, until the step has prompts_per_step groups or max_sampling_rounds x
// prompts_per_step prompts were drawn; surplus groups of the last round are not trained; if
// none is kept, the newest prompts_per_step groups are trained as drawn.
//
//   InlineSource src(ctx);
//   run_trainer_loop(ctx, src);
// Its state (kept fraction, filtered counts) rides in the checkpoints, so a resumed run
// sizes its rounds as the uninterrupted one would. Not thread-safe.
#pragma once

#include <memory>

#include "job/experience_source.h"
#include "job/run_context.h"
#include "rollout/group_rollout.h"
#include "runtime/kept_fraction.h"

namespace moerl::job {

class InlineSource final : public ExperienceSource {
 public:
  explicit InlineSource(RunContext& ctx) : ctx_(ctx) {}
  const char* mode() const override { return "sync"; }
  void start() override;
  StepExperience next_batch() override;
  nlohmann::json snapshot() override;
  void add_summary(nlohmann::json& summary) override;

 private:
  RunContext& ctx_;
  std::unique_ptr<rollout::GroupRollout> gen_;
  runtime::KeptFraction kept_fraction_;
  int64_t groups_filtered_ = 0, groups_surplus_ = 0;
};

}  // namespace moerl::job
