#include "job/local_launcher.h"

#include <ATen/Parallel.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <thread>

#include "base/deadline.h"
#include "base/error.h"
#include "base/files.h"
#include "base/log.h"
#include "base/subprocess.h"
#include "job/gpu_paths.h"
#include "job/roles.h"
#include "model/thread_stream.h"
#include "rollout/worker.h"
#include "runtime/drain.h"
#include "runtime/metered_backends.h"

namespace moerl::job {

namespace fs = std::filesystem;

namespace {

// Redis queue: `moerl rollout <run_dir>/config.toml` per worker, as the rollout pods run it.
nlohmann::json run_with_processes(const JobConfig& cfg, const JobOptions& options) {
  const fs::path conf = fs::path(options.run_dir) / "config.toml";
  write_file_atomic(conf.string(), cfg.effective_toml);
  const std::string self = fs::read_symlink("/proc/self/exe").string();  // this moerl binary
  // An earlier end's "run done" marker would send the workers away before the trainer
  // (which also removes it) starts: a finished run given more steps resumes.
  store::open_store(job_store_uri(cfg, options.run_dir))->remove(rollout::kRunDoneKey);
  std::vector<Subprocess> workers;
  std::vector<std::vector<std::string>> worker_argv;
  std::vector<std::string> argv = {self, "rollout", conf.string(), "--run-dir", options.run_dir};
  // One machine: the trainer holds [metrics] prometheus_port; each worker takes a free one (logged).
  if (cfg.metrics.prometheus_port > 0) argv.insert(argv.end(), {"--set", "metrics.prometheus_port=0"});
  // config.toml holds no password: the workers get the resolved one in their environment.
  SpawnOptions spawn_options{.parent_death_signal = SIGTERM};
  if (!cfg.runtime.queue_password.empty()) spawn_options.set_env = {{"MOERL_REDIS_PASSWORD", cfg.runtime.queue_password}};
  for (int64_t i = 0; i < cfg.rollout.num_workers; ++i) {
    std::vector<std::string> a = argv;
    a.insert(a.end(), {"--worker-id", "local-" + std::to_string(i)});
    workers.push_back(Subprocess::spawn(a, spawn_options));
    worker_argv.push_back(std::move(a));
  }
  // A worker that dies (a crash, the OOM killer, SIGKILL) is started again, as a Deployment
  // restarts its pod, with a growing pause between restarts; its leases return when they
  // expire. Without this the trainer waited for experience forever. A worker that exits 0
  // decided the run is over (drained, or the run done) and stays down.
  std::atomic<bool> watching{true};
  std::thread watcher([&] {
    std::vector<int> restarts(workers.size(), 0);
    while (watching.load()) {
      for (size_t i = 0; i < workers.size() && watching.load(); ++i) {
        const std::optional<int> status = workers[i].poll();
        if (!status || *status == 0) continue;
        const double pause = std::min(30.0, 0.5 * (1 << std::min(restarts[i], 6)));
        MOERL_LOG(WARN) << "rollout worker local-" << i << " exited with status " << *status << "; restarting it in "
                        << pause << " s (restart " << ++restarts[i] << ")";
        for (Deadline d = Deadline::after_seconds(pause); !d.expired() && watching.load();) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        // Spawned from this thread: its parent-death signal comes when the watcher ends, at reap.
        if (watching.load()) workers[i] = Subprocess::spawn(worker_argv[i], spawn_options);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  // Workers drain on their own once the trainer marks the run done; a stopped-early or
  // failed trainer leaves no marker, so they are told to drain. Either way each gets
  // drain_seconds (+ margin) before SIGKILL.
  auto reap = [&](bool tell) {
    watching = false;
    watcher.join();
    for (Subprocess& w : workers) {
      if (tell) w.signal(SIGTERM);
      w.wait_or_kill(Deadline::after_seconds(cfg.runtime.drain_seconds + 30));
    }
  };
  try {
    nlohmann::json s = run_trainer_role(cfg, options);
    reap(s.contains("stopped_at_rl_step"));
    return s;
  } catch (...) {
    reap(true);
    throw;
  }
}

// In-process queue: worker threads sharing the backends; versions pass in memory.
nlohmann::json run_with_threads(const JobConfig& cfg, const JobOptions& options) {
  enable_gpu_paths_for(cfg);  // before the worker threads build their models
  const int64_t n = cfg.rollout.num_workers;
  runtime::RuntimeBackends b = runtime::open_backends(cfg.runtime);
  std::unique_ptr<model::Tokenizer> tok = make_job_tokenizer(cfg);
  std::unique_ptr<store::ObjectStore> store = store::open_store(job_store_uri(cfg, options.run_dir));
  store->remove(rollout::kRunDoneKey);
  auto handoff = std::make_shared<rollout::WeightHandoff>();
  std::vector<std::unique_ptr<runtime::DrainController>> drains;
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(n);  // guarded by errors_mu until the threads are joined
  std::mutex errors_mu;
  runtime::Accounting worker_acc;
  for (int64_t i = 0; i < n; ++i) drains.push_back(std::make_unique<runtime::DrainController>(cfg.runtime.drain_seconds));
  for (int64_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      try {
        rollout::WorkerOptions wo;
        wo.worker_id = "thread-" + std::to_string(i);
        wo.scratch_dir = (fs::path(options.run_dir) / "scratch" / wo.worker_id).string();
        wo.intra_op_threads = 1;
        wo.model = cfg.model.options(true);
        wo.handoff = handoff;
        rollout::RolloutWorker w(worker_setup(cfg, *tok),
                                 runtime::metered_worker_backends(b, wo.worker_id, metrics::default_registry()), *store,
                                 wo);
        w.run(*drains[i], &worker_acc);
      } catch (...) {
        std::lock_guard<std::mutex> lock(errors_mu);
        errors[i] = std::current_exception();
      }
    });
  }
  // Once every worker thread has failed, no experience can come: the trainer stops with the
  // first worker's error instead of waiting for batches.
  auto check_workers = [&] {
    std::lock_guard<std::mutex> lock(errors_mu);
    if (std::count(errors.begin(), errors.end(), nullptr) > 0) return;
    try {
      std::rethrow_exception(errors[0]);
    } catch (const std::exception& e) {
      throw Error("every rollout worker thread (" + std::to_string(n) + ") stopped with an error; thread-0: " + e.what(),
                  "the trainer gets no experience without a worker; fix the cause above and rerun (the run "
                  "resumes from its last checkpoint)",
                  ErrorCode::kUnavailable);
    }
  };
  auto stop_workers = [&] {
    for (auto& d : drains) d->request_drain("trainer finished the run");
    for (auto& t : threads) if (t.joinable()) t.join();
  };
  // Two cores: one intra-op thread per role, so the trainer and the workers run side by
  // side instead of fighting over one pool.
  JobOptions trainer_options = options;
  trainer_options.intra_op_threads = 1;
  // On a GPU the workers decode on streams of their own; the trainer's kernels go first.
  const model::ThreadStream trainer_stream(cfg.model.options(false).device, /*high_priority=*/true);
  nlohmann::json summary;
  try {
    summary = run_trainer_role(cfg, trainer_options,
                               {.backends = b, .handoff = handoff, .before_report = stop_workers,
                                .check_producers = check_workers});
  } catch (...) {
    stop_workers();
    throw;
  }
  stop_workers();  // a stopped-early run never reached before_report
  for (auto& e : errors) if (e) std::rethrow_exception(e);
  if (summary.contains("stopped_at_rl_step")) return summary;
  // Rollout-side accounting (workers' busy/idle time) joins the trainer's report.
  runtime::AccountingReport wr = worker_acc.report(0);
  summary["accounting"]["rollout_idle_fraction"] = wr.rollout_idle_fraction;
  summary["accounting"]["samples_generated"] = wr.get(runtime::Counter::kSamplesGenerated);
  write_file_atomic((fs::path(options.run_dir) / "summary.json").string(), summary.dump(2) + "\n");
  return summary;
}

}  // namespace

nlohmann::json run_local_async(const JobConfig& cfg, const JobOptions& options) {
  if (cfg.rollout.num_workers < 1) {
    throw Error("config: rollout.num_workers = " + std::to_string(cfg.rollout.num_workers) +
                    " with runtime.mode = \"async\"",
                "async mode needs at least one rollout worker", ErrorCode::kInvalidInput);
  }
  if (cfg.ep_size > 1) {
    throw Error("train: ep.size=" + std::to_string(cfg.ep_size) + " runs in runtime.mode=\"sync\" only",
                "use --mode sync (expert parallelism in the async roles is not built yet)", ErrorCode::kInvalidInput);
  }
  fs::create_directories(options.run_dir);
  return cfg.runtime.backend() == runtime::BackendKind::kRedis ? run_with_processes(cfg, options)
                                                                : run_with_threads(cfg, options);
}

}  // namespace moerl::job
