// The instance side of `moerl bench rl-ep`: lockstep generation of the same batches under
// each EP backend, timed over the instance's ranks.
#include "job/rollout_ep_bench.h"

#include <algorithm>
#include <map>
#include <memory>

#include "base/deadline.h"
#include "base/error.h"
#include "base/log.h"
#include "base/seed.h"
#include "ep/torch/control_group.h"
#include "job/chat_prompts.h"
#include "job/ep_join.h"
#include "job/gpu_paths.h"
#include "job/run_context.h"
#include "rollout/group_rollout.h"

namespace moerl::job {

nlohmann::json bench_rollout_instance(const JobConfig& cfg, const RolloutEpBenchOptions& o) {
  if (o.backends.empty() || o.rounds < 1 || o.batches < 1 || o.warmup < 0) {
    throw Error("bench rl-ep: needs backends, rounds >= 1, batches >= 1, warmup >= 0",
                "e.g. --rounds 3 --batches 4", ErrorCode::kInvalidInput);
  }
  enable_gpu_paths_for(cfg);
  std::shared_ptr<ep::ControlGroup> control = ep::ControlGroup::join("bench-instance", cfg.ep_timeout_seconds);
  const int rank = control->rank(), M = control->world_size();
  std::unique_ptr<model::Tokenizer> tok = make_job_tokenizer(cfg);
  std::shared_ptr<const tasks::Task> task = task_for_tokenizer(cfg.task, cfg.chat, *tok, tokenizer_source(cfg));
  // One copy of the weights: the first backend's model owns them, the others view the same
  // tensors through their own EP group.
  std::map<std::string, std::unique_ptr<model::Model>> models;
  for (const std::string& b : o.backends) {
    model::ModelOptions mo = cfg.model.options(/*rollout=*/true);
    mo.ep_group = rollout_ep_group(cfg, b);
    if (models.empty()) {
      models[b] = std::make_unique<model::Model>(make_job_model(cfg, *tok, mo));
    } else {
      const model::Model& first = *models.begin()->second;
      models[b] = std::make_unique<model::Model>(first.config(), first.state(), mo);
    }
  }
  rollout::RolloutConfig rc = cfg.rollout.gen;
  rc.all_done = control->all_done_fn();
  const int64_t L = cfg.runtime.tasks_per_lease;
  const uint32_t G = static_cast<uint32_t>(cfg.loss.group_size);
  // Batch b's units: dataset items b*L .. b*L + L - 1, this rank's share.
  auto units_of = [&](int64_t b) {
    std::vector<runtime::TaskUnit> mine;
    for (int64_t i = 0; i < L; ++i) {
      if (i % M != rank) continue;
      const uint64_t cursor = static_cast<uint64_t>(b * L + i);
      mine.push_back(rollout::make_task_unit(task->item(tasks::Split::kTrain, cursor), *tok, G, cursor));
    }
    return mine;
  };
  nlohmann::json out = {{"ranks", M}, {"tasks_per_lease", L}, {"group_size", G}, {"backends", nlohmann::json::object()}};
  std::map<std::string, double> tokens, seconds;
  std::map<std::string, std::vector<double>> per_round;
  for (int round = 0; round < o.rounds; ++round) {
    std::vector<std::string> order = o.backends;
    if (round % 2 == 1) std::reverse(order.begin(), order.end());
    for (const std::string& b : order) {
      rollout::GroupRollout gen(*models[b], *tok, *cfg.reward, rc, "bench-rank-" + std::to_string(rank));
      for (int w = 0; w < o.warmup; ++w) gen.run(units_of(w), mix_seed(o.seed, rank, w), 0);
      control->barrier("bench rl-ep: start");
      double t0 = now_seconds(), n = 0;
      for (int k = 0; k < o.batches; ++k) {
        const int64_t batch = o.warmup + k;
        for (const auto& r : gen.run(units_of(batch), mix_seed(o.seed, rank, batch), 0)) {
          n += static_cast<double>(runtime::total_response_tokens(r));
        }
      }
      const double t = now_seconds() - t0;
      const double total = control->sum({n})[0], wall = control->max({t})[0];
      tokens[b] += total;
      seconds[b] += wall;
      per_round[b].push_back(total / std::max(1e-9, wall));
      if (rank == 0) {
        MOERL_LOG(INFO) << "bench rl-ep: round " << round << " " << b << ": " << total << " tokens in " << wall
                        << " s (" << total / std::max(1e-9, wall) << " tok/s)";
      }
    }
  }
  if (rank != 0) return nullptr;
  for (const std::string& b : o.backends) {
    out["backends"][b] = {{"tokens", tokens[b]}, {"seconds", seconds[b]},
                          {"tokens_per_s", tokens[b] / std::max(1e-9, seconds[b])}, {"rounds", per_round[b]}};
  }
  return out;
}

}  // namespace moerl::job
