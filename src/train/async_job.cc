// Trainer role, rollout role and the local launcher of the asynchronous job.
#include "train/async_job.h"

#include <ATen/Parallel.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "base/deadline.h"
#include "base/env.h"
#include "base/error.h"
#include "base/jsonl.h"
#include "base/log.h"
#include "base/metrics_plot.h"
#include "base/progress.h"
#include "rollout/evaluate.h"
#include "rollout/group_rollout.h"
#include "rollout/weight_handoff.h"
#include "rollout/weight_publisher.h"
#include "rollout/worker.h"
#include "runtime/controller.h"
#include "store/object_store.h"
#include "store/commit.h"
#include "train/checkpoint.h"

namespace moerl::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* kCheckpointRoot = "ckpt";
constexpr double kBatchWaitSeconds = 600;

void write_text_atomic(const fs::path& path, const std::string& text) {
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out) throw Error("cannot write " + tmp.string(), "check free space and permissions", ErrorCode::kIo);
  }
  fs::rename(tmp, path);
}

std::string to_hex(const std::string& bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

std::string from_hex(const std::string& hex) {
  auto val = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw Error("checkpoint: buffer snapshot is not lowercase hex", "the checkpoint is corrupt; use an older one",
                ErrorCode::kIo);
  };
  if (hex.size() % 2) throw Error("checkpoint: odd-length buffer snapshot", "the checkpoint is corrupt", ErrorCode::kIo);
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(val(hex[2 * i]) * 16 + val(hex[2 * i + 1]));
  return out;
}

// Everything the trainer role holds.
struct AsyncTrainer {
  const JobConfig& cfg;
  JobOptions opts;
  runtime::RuntimeBackends b;
  std::shared_ptr<rollout::WeightHandoff> handoff;  // set when every worker is a thread of this process
  std::unique_ptr<model::Tokenizer> tok;
  std::unique_ptr<model::Model> policy;
  std::unique_ptr<model::Model> reference;
  std::unique_ptr<store::ObjectStore> store;
  std::unique_ptr<PolicyTrainer> trainer;
  std::unique_ptr<metrics::JsonlWriter> metrics;
  TrainerState state;
  runtime::Accounting acc;
  bool resumed = false;
  double rl_seconds = 0;
  int64_t rl_samples = 0, rl_tokens = 0;
  double rl_generate_seconds = 0;  // summed generation time of the trained records
  fs::path run_dir;

  AsyncTrainer(const JobConfig& c, JobOptions o, runtime::RuntimeBackends backends,
               std::shared_ptr<rollout::WeightHandoff> h)
      : cfg(c), opts(std::move(o)), b(std::move(backends)), handoff(std::move(h)), run_dir(opts.run_dir) {}

  void setup() {
    fs::create_directories(run_dir);
    write_text_atomic(run_dir / "config.toml", cfg.effective_toml);
    tok = make_job_tokenizer(cfg);
    if (cfg.model.init == "random") {
      io::HfConfig arch = cfg.model.arch;
      arch.vocab_size = tok->vocab_size();
      arch.bos_token_id = tok->bos_id();
      arch.eos_token_id = tok->eos_id();
      arch.pad_token_id = tok->pad_id();
      arch.validate("[model]");
      policy = std::make_unique<model::Model>(model::init_random(arch, cfg.model.seed, cfg.model.options(false)));
    } else {
      policy = std::make_unique<model::Model>(model::load_model(cfg.model.init, cfg.model.options(false)));
    }
    store = store::open_store(job_store_uri(cfg, run_dir.string()));
    trainer = std::make_unique<PolicyTrainer>(*policy, nullptr, cfg.train.trainer, tok->pad_id());
    if (opts.resume) {
      if (auto ck = load_latest_checkpoint(*store, kCheckpointRoot, (run_dir / "resume").string())) {
        restore(*ck, *policy, *trainer);
        state = ck->state;
        resumed = true;
      }
    }
    if (!resumed) store->remove(rollout::kRunDoneKey);
    metrics = std::make_unique<metrics::JsonlWriter>(
        (run_dir / "metrics.jsonl").string(), resumed ? metrics::JsonlMode::kAppend : metrics::JsonlMode::kTruncate);
    // trained.jsonl: keep only tasks trained up to the restored step (later ones are redone).
    fs::path log = run_dir / "trained.jsonl";
    std::string kept;
    if (resumed && fs::exists(log)) {
      std::ifstream in(log);
      for (std::string line; std::getline(in, line);) {
        if (line.empty()) continue;
        try {
          if (nlohmann::json::parse(line).at("step").get<int64_t>() <= state.rl_step) kept += line + "\n";
        } catch (const std::exception&) {
          // a torn last line from the crash: drop it
        }
      }
    }
    write_text_atomic(log, kept);
    MOERL_LOG(INFO) << "trainer: " << policy->num_parameters() << " parameters, task " << cfg.task->name()
                    << ", queue " << runtime::redact_url(cfg.runtime.queue_url) << (resumed ? ", resumed at step " +
                    std::to_string(state.rl_step) : "");
  }

  void checkpoint(runtime::AsyncController* ctl) {
    runtime::BufferSnapshot snap;
    if (ctl) {
      snap = ctl->snapshot();
      state.extra["async_buffer"] = to_hex(snap.encode());
    }
    std::string prefix = save_checkpoint(*store, kCheckpointRoot, state, *policy, *tok, *trainer,
                                         cfg.train.keep_checkpoints);
    if (ctl) b.buffer->checkpoint_committed(snap, Deadline::after_seconds(cfg.runtime.call_timeout_seconds));
    MOERL_LOG(INFO) << "checkpoint: committed " << prefix;
  }

  void sft_phase() {
    const TrainSection& t = cfg.train;
    if (state.sft_step >= t.sft_steps) return;
    LrSchedule sched{.lr = t.sft_lr, .warmup_steps = std::min<int64_t>(10, t.sft_steps / 10),
                     .total_steps = t.sft_steps, .min_lr_ratio = 0.1};
    Progress progress("sft", t.sft_steps, {.initial_step = state.sft_step, .unit = "step"});
    while (state.sft_step < t.sft_steps) {
      std::vector<runtime::Sample> batch;
      for (const auto& it : cfg.task->items(tasks::Split::kTrain, state.cursor, t.sft_batch_size)) {
        runtime::Sample s;
        for (int64_t id : tok->encode(it.prompt, true)) s.prompt_tokens.push_back(static_cast<int32_t>(id));
        for (int64_t id : tok->encode(it.answer, false)) s.response_tokens.push_back(static_cast<int32_t>(id));
        s.response_tokens.push_back(static_cast<int32_t>(tok->eos_id()));
        s.behaviour_logprobs.assign(s.response_tokens.size(), 0.f);
        batch.push_back(std::move(s));
      }
      state.cursor += t.sft_batch_size;
      StepStats st = trainer->sft_step(batch, sched.at(state.sft_step));
      ++state.sft_step;
      metrics->write({{"phase", "sft"}, {"sft_step", state.sft_step}, {"loss", st.loss},
                      {"grad_norm", st.grad_norm}, {"lr", st.lr}, {"seconds", st.seconds}});
      progress.update(state.sft_step, {{"loss", st.loss}});
    }
    progress.finish();
    checkpoint(nullptr);
  }

  rollout::EvalResult eval(const char* label) {
    rollout::EvalConfig ec{.num_prompts = cfg.train.eval_prompts, .max_new_tokens = cfg.rollout.gen.max_new_tokens};
    rollout::EvalResult e = rollout::evaluate(*policy, *tok, *cfg.task, *cfg.reward, ec);
    MOERL_LOG(INFO) << "eval " << label << ": mean reward " << e.mean_reward << " over " << e.num_prompts
                    << " held-out prompts";
    return e;
  }

  // Publishes the current weights as a version above everything already published or
  // committed (a restarted trainer's lost versions are never reused).
  void publish_current() {
    Deadline d = Deadline::after_seconds(cfg.runtime.call_timeout_seconds);
    uint64_t v = state.policy_version;
    if (auto latest = b.weights->latest(d); latest && latest->version >= v && resumed_publish_pending) {
      v = latest->version + 1;
    }
    while (store->head(rollout::weights_prefix(v) + "/" + store::kManifestName)) ++v;
    resumed_publish_pending = false;
    state.policy_version = v;
    if (handoff) {
      b.weights->publish(v, handoff->put(v, *policy), d);  // in-process workers: in memory
    } else {
      rollout::publish_weights(*store, *b.weights, v, *policy, (run_dir / "scratch").string(), {.keep = 3}, d);
    }
  }
  bool resumed_publish_pending = true;

  void rl_phase(const std::function<void()>& before_report, nlohmann::json* accounting) {
    const TrainSection& t = cfg.train;
    const int64_t P = cfg.rollout.prompts_per_step;
    const uint32_t G = static_cast<uint32_t>(cfg.loss.group_size);
    if (cfg.loss.kl_coef > 0) {
      model::Params copy;
      for (const auto& [name, p] : policy->params()) copy[name] = p.detach().clone();
      reference = std::make_unique<model::Model>(policy->config(), std::move(copy));
      trainer = std::make_unique<PolicyTrainer>(*policy, reference.get(), cfg.train.trainer, tok->pad_id());
    }
    if (!state.extra.contains("rl_first_cursor")) state.extra["rl_first_cursor"] = state.cursor;
    const uint64_t first = state.extra["rl_first_cursor"].get<uint64_t>();
    runtime::ControllerConfig cc;
    // Dynamic sampling may need up to max_sampling_rounds prompts per trained group.
    cc.total_tasks = t.steps * P * (cfg.rollout.dynamic_sampling ? cfg.rollout.max_sampling_rounds : 1);
    cc.queue_ahead = std::max<int64_t>(P, cfg.runtime.tasks_per_lease * cfg.rollout.num_workers);
    cc.drop_no_signal = cfg.rollout.dynamic_sampling;
    cc.max_queue_factor = cfg.rollout.max_sampling_rounds;
    cc.first_cursor = first;
    cc.stale = {.max_staleness = cfg.runtime.max_staleness, .policy = cfg.runtime.stale_policy};
    cc.call_timeout_seconds = cfg.runtime.call_timeout_seconds;
    const tasks::Task& task = *cfg.task;
    runtime::AsyncController ctl(cc, *b.queue, *b.buffer, [&](uint64_t cursor, uint32_t attempt) {
      runtime::TaskUnit u = rollout::make_task_unit(task.item(tasks::Split::kTrain, cursor), *tok, G, cursor);
      u.task_id = "c" + std::to_string(cursor);
      u.attempt = attempt;
      return u;
    }, &acc);
    Deadline d = Deadline::after_seconds(cfg.runtime.call_timeout_seconds);
    if (state.extra.contains("async_buffer")) {
      ctl.restore(runtime::BufferSnapshot::decode(from_hex(state.extra["async_buffer"].get<std::string>())), d);
    }
    publish_current();
    std::ofstream trained(run_dir / "trained.jsonl", std::ios::app);
    Progress progress("rl", t.steps, {.initial_step = state.rl_step, .unit = "step"});
    double loop_start = now_seconds();
    while (state.rl_step < t.steps && !ctl.finished(Deadline::after_seconds(cfg.runtime.call_timeout_seconds))) {
      double t0 = now_seconds();
      std::vector<runtime::ExperienceRecord> batch =
          ctl.next_batch(static_cast<size_t>(P), state.policy_version, Deadline::after_seconds(kBatchWaitSeconds));
      // Refill the queue now, so the workers generate the next batch while this one trains.
      ctl.top_up(Deadline::after_seconds(cfg.runtime.call_timeout_seconds));
      double t1 = now_seconds();
      if (batch.empty()) {
        if (ctl.finished(Deadline::after_seconds(cfg.runtime.call_timeout_seconds))) break;
        MOERL_LOG(WARN) << "trainer: no experience within " << kBatchWaitSeconds << " s; still waiting";
        continue;
      }
      double stale_sum = 0;
      uint64_t stale_max = 0;
      for (const auto& r : batch) {
        uint64_t s = runtime::staleness(r, state.policy_version);
        stale_sum += static_cast<double>(s);
        stale_max = std::max(stale_max, s);
      }
      StepStats st = trainer->train_step(batch);
      acc.add(runtime::Counter::kSamplesTrained, st.num_samples);
      ++state.rl_step;
      int64_t tokens = 0;
      for (const auto& r : batch) {
        tokens += runtime::total_response_tokens(r);
        rl_generate_seconds += r.generate_seconds;
        trained << nlohmann::json{{"step", state.rl_step}, {"task_id", r.task_id}, {"attempt", r.attempt},
                                  {"cursor", r.cursor}, {"worker", r.worker_id},
                                  {"version", runtime::oldest_version(r)}, {"samples", r.samples.size()}}
                       .dump()
                << "\n";
      }
      trained.flush();
      state.cursor = ctl.data_cursor();
      ++state.policy_version;
      const double tp = now_seconds();
      if (state.policy_version % static_cast<uint64_t>(cfg.runtime.publish_every) == 0) publish_current();
      double t2 = now_seconds();
      rl_samples += st.num_samples;
      rl_tokens += tokens;
      runtime::AccountingReport rep = ctl.report(Deadline::after_seconds(cfg.runtime.call_timeout_seconds));
      nlohmann::json row = {{"phase", "rl"}, {"step", state.rl_step}, {"reward", st.reward_mean},
                            {"reward_std", st.reward_std}, {"loss", st.loss}, {"pg_loss", st.pg_loss},
                            {"kl", st.kl}, {"entropy", st.entropy}, {"clip_frac", st.clip_frac},
                            {"behav_weight", st.behav_weight}, {"grad_norm", st.grad_norm}, {"lr", st.lr},
                            {"response_len", st.response_len}, {"samples", st.num_samples},
                            {"wait_s", t1 - t0}, {"train_s", t2 - t1}, {"publish_s", t2 - tp},
                            {"step_s", st.seconds}, {"version", state.policy_version},
                            {"staleness_mean", stale_sum / batch.size()}, {"staleness_max", stale_max},
                            {"queue_depth", rep.queue_depth}, {"trainer_idle_fraction", rep.trainer_idle_fraction},
                            {"rollout_idle_fraction", rep.rollout_idle_fraction},
                            {"flat_groups", std::count_if(batch.begin(), batch.end(), [](const auto& r) {
                               return !runtime::has_signal(r); })}};
      if (cfg.rollout.dynamic_sampling) row["groups_filtered"] = rep.get(runtime::Counter::kGroupsFiltered);
      if (t.eval_every > 0 && state.rl_step % t.eval_every == 0 && state.rl_step < t.steps) {
        row["eval_reward"] = eval("periodic").mean_reward;
      }
      metrics->write(row);
      progress.update(state.rl_step, {{"reward", st.reward_mean}, {"stale", stale_sum / batch.size()}});
      if (t.checkpoint_every > 0 && state.rl_step % t.checkpoint_every == 0 && state.rl_step < t.steps) {
        checkpoint(&ctl);
      }
    }
    rl_seconds += now_seconds() - loop_start;
    progress.finish();
    // Redelivered copies of tasks already trained (a worker died between put and ack) may
    // still be queued: let the workers finish and ack them, so the queue ends empty.
    for (Deadline settle = Deadline::after_seconds(3 * cfg.runtime.lease_seconds + 10); !settle.expired();) {
      if (b.queue->depth(Deadline::after_seconds(cfg.runtime.call_timeout_seconds)).queued() == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    // The run is over: workers drain when they see this marker.
    store->put(rollout::kRunDoneKey, std::to_string(state.policy_version));
    if (before_report) before_report();
    state.extra["async_done"] = true;
    checkpoint(&ctl);
    *accounting = ctl.report(Deadline::after_seconds(cfg.runtime.call_timeout_seconds)).to_json();
  }

  nlohmann::json run(const std::function<void()>& before_report) {
    double start = now_seconds();
    setup();
    sft_phase();
    if (!state.extra.contains("eval_sft")) {
      rollout::EvalResult e = eval("after SFT");
      state.extra["eval_sft"] = {{"mean_reward", e.mean_reward}, {"exact", e.exact_fraction}};
    }
    nlohmann::json accounting;
    rl_phase(before_report, &accounting);
    rollout::EvalResult fin = eval("final");
    policy->save((run_dir / "final_model").string());
    tok->save((run_dir / "final_model").string());
    double wall = now_seconds() - start;
    nlohmann::json summary = {
        {"task", cfg.task->name()},
        {"algorithm", rl::name_of(cfg.loss.algorithm)},
        {"mode", "async"},
        {"queue_url", runtime::redact_url(cfg.runtime.queue_url)},
        {"num_workers", cfg.rollout.num_workers},
        {"steps", {{"sft", state.sft_step}, {"rl", state.rl_step}}},
        {"parameters", policy->num_parameters()},
        {"eval",
         {{"sft", state.extra["eval_sft"]["mean_reward"]},
          {"final", fin.mean_reward},
          {"sft_exact", state.extra["eval_sft"]["exact"]},
          {"final_exact", fin.exact_fraction},
          {"num_prompts", fin.num_prompts}}},
        {"throughput",
         {{"samples_per_s", rl_samples / std::max(1e-9, rl_seconds)},
          {"train_tokens_per_s", rl_tokens / std::max(1e-9, rl_seconds)},
          // Per worker, while generating: trained response tokens / their generation time.
          {"rollout_tokens_per_s", rl_tokens / std::max(1e-9, rl_generate_seconds)},
          {"rl_seconds", rl_seconds},
          {"samples", rl_samples}}},
        {"accounting", accounting},
        {"policy_version", state.policy_version},
        {"wall_s", wall}};
    write_text_atomic(run_dir / "summary.json", summary.dump(2) + "\n");
    if (opts.plot) {
      MetricsPlotSpec spec;
      spec.panels = {"reward", "staleness_mean", "queue_depth", "trainer_idle_fraction"};
      spec.title = "moerl train (async): " + cfg.task->name();
      plot_metrics_jsonl((run_dir / "metrics.jsonl").string(), (run_dir / "plot.png").string(), spec);
    }
    MOERL_LOG(INFO) << "trainer: done in " << wall << " s; eval " << summary["eval"]["sft"] << " -> "
                    << fin.mean_reward << "; accounting " << accounting.dump();
    return summary;
  }
};

rollout::WorkerSetup worker_setup(const JobConfig& cfg, const model::Tokenizer& tok) {
  rollout::WorkerSetup s;
  s.tokenizer = &tok;
  s.reward = cfg.reward.get();
  s.gen = cfg.rollout.gen;
  s.runtime = cfg.runtime;
  s.seed = cfg.train.seed;
  return s;
}

}  // namespace

std::unique_ptr<model::Tokenizer> make_job_tokenizer(const JobConfig& cfg) {
  if (cfg.model.init == "random") return std::make_unique<model::CharTokenizer>();
  return model::load_tokenizer(cfg.model.init);
}

std::string job_store_uri(const JobConfig& cfg, const std::string& run_dir) {
  return cfg.store_uri.empty() ? (fs::path(run_dir) / "store").string() : cfg.store_uri;
}

nlohmann::json run_trainer(const JobConfig& cfg, const JobOptions& options, runtime::RuntimeBackends backends,
                           const std::function<void()>& before_report,
                           std::shared_ptr<rollout::WeightHandoff> handoff) {
  AsyncTrainer t(cfg, options, std::move(backends), std::move(handoff));
  return t.run(before_report);
}

nlohmann::json run_trainer_role(const JobConfig& cfg, const JobOptions& options) {
  if (cfg.train.threads > 0) at::set_num_threads(static_cast<int>(cfg.train.threads));
  return run_trainer(cfg, options, runtime::open_backends(cfg.runtime));
}

int run_rollout_role(const JobConfig& cfg, const RolloutRoleOptions& options) {
  runtime::DrainController drain(cfg.runtime.drain_seconds);
  runtime::DrainController::install_signal_handlers(&drain);
  std::unique_ptr<model::Tokenizer> tok = make_job_tokenizer(cfg);
  std::unique_ptr<store::ObjectStore> store = store::open_store(job_store_uri(cfg, options.run_dir));
  rollout::WorkerOptions wo;
  wo.worker_id = options.worker_id;
  wo.scratch_dir = (fs::path(options.run_dir) / "scratch" / options.worker_id).string();
  wo.max_tasks = options.max_tasks;
  wo.intra_op_threads = options.intra_op_threads;
  wo.model = cfg.model.options(true);
  rollout::RolloutWorker w(worker_setup(cfg, *tok), runtime::open_backends(cfg.runtime), *store, wo);
  rollout::WorkerStats st = w.run(drain);
  runtime::DrainController::install_signal_handlers(nullptr);
  MOERL_LOG(INFO) << options.worker_id << ": exit (" << st.loop.completed << " tasks, " << st.batches
                  << " batches, versions " << st.first_version << ".." << st.last_version << ")";
  return st.loop.exit_code;
}

nlohmann::json run_async_job(const JobConfig& cfg, const JobOptions& options) {
  const int64_t n = cfg.rollout.num_workers;
  if (n < 1) {
    throw Error("config: rollout.num_workers = " + std::to_string(n) + " with runtime.mode = \"async\"",
                "async mode needs at least one rollout worker", ErrorCode::kInvalidInput);
  }
  fs::create_directories(options.run_dir);
  if (cfg.runtime.backend() == runtime::BackendKind::kRedis) {
    // Separate local processes: `moerl rollout <run_dir>/config.toml` per worker.
    fs::path conf = fs::path(options.run_dir) / "config.toml";
    write_text_atomic(conf, cfg.effective_toml);
    std::vector<pid_t> kids;
    for (int64_t i = 0; i < n; ++i) {
      std::string id = "local-" + std::to_string(i);
      pid_t pid = fork();
      if (pid < 0) throw Error("fork failed", "too many processes?", ErrorCode::kInternal);
      if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        std::vector<std::string> argv = {"moerl", "rollout", conf.string(), "--run-dir", options.run_dir,
                                         "--worker-id", id};
        std::vector<char*> cargv;
        for (auto& a : argv) cargv.push_back(a.data());
        cargv.push_back(nullptr);
        execv("/proc/self/exe", cargv.data());
        _exit(127);
      }
      kids.push_back(pid);
    }
    auto reap = [&] {
      Deadline d = Deadline::after_seconds(cfg.runtime.drain_seconds + 30);
      for (pid_t p : kids) {
        int status = 0;
        while (waitpid(p, &status, WNOHANG) == 0) {
          if (d.expired()) {
            kill(p, SIGKILL);
            waitpid(p, &status, 0);
            break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      }
      kids.clear();
    };
    try {
      nlohmann::json s = run_trainer_role(cfg, options);
      reap();
      return s;
    } catch (...) {
      for (pid_t p : kids) kill(p, SIGTERM);
      reap();
      throw;
    }
  }
  // Threads over shared in-process backends. Two cores: one intra-op thread per role, so
  // the trainer and the workers run side by side instead of fighting over one pool.
  at::set_num_threads(1);
  runtime::RuntimeBackends b = runtime::open_backends(cfg.runtime);
  std::unique_ptr<model::Tokenizer> tok = make_job_tokenizer(cfg);
  std::unique_ptr<store::ObjectStore> store = store::open_store(job_store_uri(cfg, options.run_dir));
  store->remove(rollout::kRunDoneKey);
  // Workers are threads here: versions pass in memory, not through the store.
  auto handoff = std::make_shared<rollout::WeightHandoff>();
  std::vector<std::unique_ptr<runtime::DrainController>> drains;
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(n);
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
        rollout::RolloutWorker w(worker_setup(cfg, *tok), b, *store, wo);
        w.run(*drains[i], &worker_acc);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  }
  auto stop_workers = [&] {
    for (auto& d : drains) d->request_drain("trainer finished the run");
    for (auto& t : threads) if (t.joinable()) t.join();
  };
  nlohmann::json summary;
  try {
    summary = run_trainer(cfg, options, b, stop_workers, handoff);
  } catch (...) {
    stop_workers();
    throw;
  }
  for (auto& e : errors) if (e) std::rethrow_exception(e);
  // Rollout-side accounting (workers' busy/idle time) joins the trainer's report.
  runtime::AccountingReport wr = worker_acc.report(0);
  summary["accounting"]["rollout_idle_fraction"] = wr.rollout_idle_fraction;
  summary["accounting"]["samples_generated"] = wr.get(runtime::Counter::kSamplesGenerated);
  write_text_atomic(fs::path(options.run_dir) / "summary.json", summary.dump(2) + "\n");
  return summary;
}

}  // namespace moerl::train
