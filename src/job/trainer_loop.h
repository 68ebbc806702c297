// The trainer loop of every job, sync or async: SFT warm start (resumable), held-out
// evaluation, RL steps over an experience source (job/experience_source.h) with the metrics
// row of each step, periodic evaluation and checkpoints (the source's state included), then
// the final evaluation, checkpoint and model, summary.json and plot.png.
//
//   RunContext ctx(cfg, opts);
//   InlineSource src(ctx);                              // or QueueSource
//   nlohmann::json summary = run_trainer_loop(ctx, src);
// Throughput is defined once for both modes: samples_per_s (and response_tokens_per_s) =
// samples (response tokens) trained / the summed time of the RL steps (obtaining the
// experience + training + the source's after-step work); evaluation and checkpoints are
// outside it. train_tokens_per_s = prompt + response tokens / training time alone;
// rollout_tokens_per_s = tokens generated / time spent generating them (sync: the trainer's
// generation phase; async: each worker's generation time of the trained records).
// Failures: moerl::Error; committed checkpoints stay valid and a rerun resumes.
#pragma once

#include <nlohmann/json.hpp>

#include "job/experience_source.h"
#include "job/run_context.h"

namespace moerl::job {

nlohmann::json run_trainer_loop(RunContext& ctx, ExperienceSource& source);

}  // namespace moerl::job
