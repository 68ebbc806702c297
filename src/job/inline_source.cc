#include "job/inline_source.h"

#include <cmath>
#include <iterator>

#include "base/deadline.h"
#include "base/log.h"
#include "base/seed.h"

namespace moerl::job {

void InlineSource::start() {
  rollout::RolloutConfig rc = ctx_.cfg.rollout.gen;
  rc.all_done = ctx_.lockstep();
  gen_ = std::make_unique<rollout::GroupRollout>(*ctx_.policy, *ctx_.tok, *ctx_.cfg.reward, rc,
                                                 "sync-" + std::to_string(ctx_.rank));
  const nlohmann::json& extra = ctx_.state.extra;
  if (extra.contains("source")) {
    const nlohmann::json& s = extra["source"];
    kept_fraction_.set_raw(s.at("kept_fraction").get<double>());
    groups_filtered_ = s.at("groups_filtered").get<int64_t>();
    groups_surplus_ = s.at("groups_surplus").get<int64_t>();
  }
}

nlohmann::json InlineSource::snapshot() {
  return {{"kept_fraction", kept_fraction_.raw()},
          {"groups_filtered", groups_filtered_},
          {"groups_surplus", groups_surplus_}};
}

StepExperience InlineSource::next_batch() {
  const JobConfig& cfg = ctx_.cfg;
  train::TrainerState& state = ctx_.state;
  const int64_t P = cfg.rollout.prompts_per_step;
  const bool dynamic = cfg.rollout.dynamic_sampling;  // one rank only (checked by JobConfig)
  const int64_t budget = dynamic ? P * cfg.rollout.max_sampling_rounds : P;
  const double t0 = now_seconds();
  cfg.reward->drain_extra_logs();  // what evaluation scored is not this step's
  StepExperience out;
  std::vector<runtime::ExperienceRecord>& kept = out.records;
  std::vector<runtime::ExperienceRecord> flat;  // groups set aside, newest last
  int64_t drawn = 0;
  for (uint64_t round = 0; drawn < budget && static_cast<int64_t>(kept.size()) < P; ++round) {
    const double want = static_cast<double>(P - static_cast<int64_t>(kept.size()));
    const int64_t n = round == 0 ? P : std::min<int64_t>(budget - drawn, static_cast<int64_t>(std::ceil(
                                                          want / kept_fraction_.value(0.05))));
    std::vector<runtime::TaskUnit> units;
    for (int64_t i = 0; i < n; ++i) {
      if (i % ctx_.world == ctx_.rank) {  // rank r takes prompts r, r+R, ...; a group stays on one rank
        units.push_back(rollout::make_task_unit(ctx_.task->item(tasks::Split::kTrain, state.cursor), *ctx_.tok,
                                                static_cast<uint32_t>(cfg.loss.group_size), state.cursor));
      }
      ++state.cursor;
    }
    drawn += n;
    const uint64_t stream = 1 + (static_cast<uint64_t>(ctx_.rank) << 32) + (round << 48);
    for (runtime::ExperienceRecord& r :
         gen_->run(units, mix_seed(cfg.train.seed, stream, static_cast<uint64_t>(state.rl_step)),
                   state.policy_version)) {
      out.generated_tokens += runtime::total_response_tokens(r);
      if (!dynamic) {
        kept.push_back(std::move(r));
        continue;
      }
      const bool signal = runtime::has_signal(r);
      kept_fraction_.observe(signal);
      if (signal) {
        kept.push_back(std::move(r));
      } else {
        flat.push_back(std::move(r));
        ++groups_filtered_;
      }
    }
  }
  if (static_cast<int64_t>(kept.size()) > P) {
    groups_surplus_ += static_cast<int64_t>(kept.size()) - P;
    kept.resize(static_cast<size_t>(P));
  }
  if (kept.empty()) {
    // No group with a reward spread in the whole budget: train on the newest
    // prompts_per_step groups as drawn (policy-gradient term 0; the MoE auxiliary losses apply).
    MOERL_LOG(WARN) << "rl step " << state.rl_step + 1 << ": no prompt group with unequal rewards in " << drawn
                    << " prompts; training on the newest " << std::min<int64_t>(P, drawn) << " as drawn";
    const size_t from = flat.size() - std::min(flat.size(), static_cast<size_t>(P));
    kept.assign(std::make_move_iterator(flat.begin() + static_cast<std::ptrdiff_t>(from)),
                std::make_move_iterator(flat.end()));
  }
  // NOTE: the trainer loop sums generate_seconds over ranks, and the ranks generated in
  // lockstep over the same wall time: each reports its share, so the sum is that time.
  out.generate_seconds = (now_seconds() - t0) / ctx_.world;
  if (dynamic) out.row["groups_filtered"] = groups_filtered_;
  // Named sub-scores of this step's rewards (an "http" reward's extra_logs), on this rank.
  const std::map<std::string, double> extra = cfg.reward->drain_extra_logs();
  if (!extra.empty()) out.row["reward_extra"] = extra;
  return out;
}

void InlineSource::add_summary(nlohmann::json& summary) {
  if (ctx_.cfg.rollout.dynamic_sampling) {
    summary["sampling"] = {{"groups_filtered", groups_filtered_}, {"groups_surplus", groups_surplus_}};
  }
}

}  // namespace moerl::job
