#include "job/roles.h"

#include <filesystem>

#include "base/error.h"
#include "base/files.h"
#include "base/log.h"
#include "job/gpu_paths.h"
#include "job/ep_join.h"
#include "job/inline_source.h"
#include "job/local_launcher.h"
#include "job/metrics_endpoint.h"
#include "job/trainer_loop.h"
#include "runtime/drain.h"
#include "runtime/metered_backends.h"

namespace moerl::job {

nlohmann::json run_job(const JobConfig& cfg, const JobOptions& options) {
  if (cfg.runtime.mode == runtime::RunMode::kAsync) return run_local_async(cfg, options);
  RunContext ctx(cfg, options);
  InlineSource source(ctx);
  return run_trainer_loop(ctx, source);
}

nlohmann::json run_trainer_role(const JobConfig& cfg, const JobOptions& options, QueueSourceOptions source) {
  if (!source.backends.queue) source.backends = runtime::open_backends(cfg.runtime);
  RunContext ctx(cfg, options);  // ep.size ranks: one trainer group, one consumer (QueueSource)
  QueueSource queue(ctx, std::move(source));
  return run_trainer_loop(ctx, queue);
}

rollout::WorkerSetup worker_setup(const JobConfig& cfg, const model::Tokenizer& tok) {
  rollout::WorkerSetup s;
  s.tokenizer = &tok;
  s.reward = cfg.reward.get();
  s.gen = cfg.rollout.gen;
  s.runtime = cfg.runtime;
  s.seed = cfg.train.seed;
  return s;
}

int run_rollout_role(const JobConfig& cfg, const RolloutRoleOptions& options) {
  enable_gpu_paths_for(cfg);
  // rollout.ep_size ranks: one instance, one worker toward the queue, named by rank 0's id.
  RolloutInstance instance = join_rollout_instance(cfg);
  const int rank = instance.control ? instance.control->rank() : 0;
  const std::string worker_id = instance.control ? instance.control->broadcast(options.worker_id) : options.worker_id;
  MOERL_LOG(INFO) << "rollout worker id " << worker_id << (instance.control ? ", rank " + std::to_string(rank) : "");
  runtime::DrainController drain(cfg.runtime.drain_seconds);
  runtime::DrainController::install_signal_handlers(&drain);
  std::unique_ptr<model::Tokenizer> tok = make_job_tokenizer(cfg);
  std::unique_ptr<store::ObjectStore> store = store::open_store(job_store_uri(cfg, options.run_dir));
  rollout::WorkerOptions wo;
  wo.worker_id = worker_id;
  const std::filesystem::path scratch = std::filesystem::path(options.run_dir) / "scratch" / worker_id;
  wo.scratch_dir = (instance.control ? scratch / ("rank-" + std::to_string(rank)) : scratch).string();
  wo.max_tasks = options.max_tasks;
  wo.intra_op_threads = options.intra_op_threads;
  wo.model = cfg.model.options(true);
  wo.model.ep_group = instance.ep;
  wo.instance = instance.control;
  std::unique_ptr<metrics::MetricsServer> endpoint;
  if (rank == 0) endpoint = start_metrics_endpoint(cfg.metrics, "rollout", {{"worker", worker_id}});
  rollout::RolloutWorker w(worker_setup(cfg, *tok),
                           runtime::metered_worker_backends(runtime::open_backends(cfg.runtime), worker_id,
                                                            metrics::default_registry()),
                           *store, wo);
  rollout::WorkerStats st = w.run(drain);
  // Each start has its own id, so its scratch dir (staged weights) would outlive it in a
  // shared run dir; run() has joined the stager, nothing writes there any more.
  try {
    remove_tree(wo.scratch_dir);
  } catch (const Error& e) {
    MOERL_LOG(WARN) << worker_id << ": could not remove its scratch dir: " << e.what();
  }
  // A drain (SIGTERM, Spot notice, the trainer's end) bounds the wait by what is left of it.
  finish_metrics_endpoint(endpoint.get(), cfg.metrics, "rollout", drain.remaining_seconds());
  runtime::DrainController::install_signal_handlers(nullptr);
  MOERL_LOG(INFO) << worker_id << (rank > 0 ? " rank " + std::to_string(rank) : std::string()) << ": exit ("
                  << st.loop.completed << " tasks, " << st.batches << " batches, versions " << st.first_version << ".."
                  << st.last_version << (st.version_splits ? ", " + std::to_string(st.version_splits) +
                                                                 " batches waited for every rank to stage a version"
                                                           : std::string())
                  << ")";
  return st.loop.exit_code;
}

}  // namespace moerl::job
