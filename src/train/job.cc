#include "train/job.h"

#include <ATen/Parallel.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "base/deadline.h"
#include "base/error.h"
#include "base/jsonl.h"
#include "base/log.h"
#include "base/metrics_plot.h"
#include "base/progress.h"
#include "model/tokenizer.h"
#include "rollout/evaluate.h"
#include "rollout/group_rollout.h"
#include "store/commit.h"
#include "store/object_store.h"
#include "io/tensor_io.h"
#include "train/checkpoint.h"
#include "train/reward_model.h"

namespace moerl::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* kCheckpointRoot = "ckpt";

uint64_t mix_seed(uint64_t seed, uint64_t stream, uint64_t step) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull ^ (stream + 0x632BE59BD9B4E019ull) * 0xBF58476D1CE4E5B9ull ^ step;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

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

// Everything one job holds; built once, then the phases run over it.
struct Job {
  const JobConfig& cfg;
  JobOptions opts;
  std::unique_ptr<model::Tokenizer> tok;
  std::unique_ptr<model::Model> policy;
  std::unique_ptr<model::Model> reference;
  std::unique_ptr<store::ObjectStore> store;
  std::unique_ptr<PolicyTrainer> trainer;
  std::unique_ptr<metrics::JsonlWriter> metrics;
  TrainerState state;
  // Accumulated over this process's RL steps, for throughput.
  double rl_seconds = 0, gen_seconds = 0, train_seconds = 0;
  int64_t rl_samples = 0, gen_tokens = 0, train_tokens = 0;
  bool stopped_early = false;

  Job(const JobConfig& c, JobOptions o) : cfg(c), opts(std::move(o)) {}

  void setup() {
    fs::create_directories(opts.run_dir);
    write_text_atomic(fs::path(opts.run_dir) / "config.toml", cfg.effective_toml);
    if (cfg.train.threads > 0) at::set_num_threads(static_cast<int>(cfg.train.threads));
    if (cfg.model.init == "random") {
      tok = std::make_unique<model::CharTokenizer>();
      io::HfConfig arch = cfg.model.arch;
      arch.vocab_size = tok->vocab_size();
      arch.bos_token_id = tok->bos_id();
      arch.eos_token_id = tok->eos_id();
      arch.pad_token_id = tok->pad_id();
      arch.validate("[model]");
      policy = std::make_unique<model::Model>(model::init_random(arch, cfg.model.seed));
    } else {
      tok = model::load_tokenizer(cfg.model.init);
      policy = std::make_unique<model::Model>(model::load_model(cfg.model.init));
    }
    std::string uri = cfg.store_uri.empty() ? (fs::path(opts.run_dir) / "store").string() : cfg.store_uri;
    store = store::open_store(uri);
    trainer = std::make_unique<PolicyTrainer>(*policy, nullptr, cfg.train.trainer, tok->pad_id());
    bool resumed = false;
    if (opts.resume) {
      if (auto ck = load_latest_checkpoint(*store, kCheckpointRoot, (fs::path(opts.run_dir) / "resume").string())) {
        restore(*ck, *policy, *trainer);
        state = ck->state;
        resumed = true;
      } else {
        // No usable commit. A manifest that exists but cannot be read is an unreadable
        // checkpoint, not a fresh start: open it to raise the reader's error.
        for (const auto& obj : store->list(std::string(kCheckpointRoot) + "/")) {
          const std::string suffix = "/manifest.moerl.json";
          if (obj.key.size() > suffix.size() && obj.key.ends_with(suffix)) {
            store::CommitReader::open(*store, obj.key.substr(0, obj.key.size() - suffix.size()));
          }
        }
      }
    }
    metrics = std::make_unique<metrics::JsonlWriter>(
        (fs::path(opts.run_dir) / "metrics.jsonl").string(),
        resumed ? metrics::JsonlMode::kAppend : metrics::JsonlMode::kTruncate);
    MOERL_LOG(INFO) << "train: " << policy->num_parameters() << " parameters, task " << cfg.task->name()
                    << ", store " << uri << (resumed ? ", resumed" : "");
  }

  void checkpoint() {
    std::string prefix = save_checkpoint(*store, kCheckpointRoot, state, *policy, *tok, *trainer,
                                         cfg.train.keep_checkpoints);
    MOERL_LOG(INFO) << "checkpoint: committed " << prefix;
  }

  runtime::Sample sft_sample(const tasks::TaskItem& it) const {
    runtime::Sample s;
    for (int64_t id : tok->encode(it.prompt, true)) s.prompt_tokens.push_back(static_cast<int32_t>(id));
    for (int64_t id : tok->encode(it.answer, false)) s.response_tokens.push_back(static_cast<int32_t>(id));
    s.response_tokens.push_back(static_cast<int32_t>(tok->eos_id()));
    s.behaviour_logprobs.assign(s.response_tokens.size(), 0.f);
    return s;
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
        batch.push_back(sft_sample(it));
      }
      state.cursor += t.sft_batch_size;
      StepStats st = trainer->sft_step(batch, sched.at(state.sft_step));
      ++state.sft_step;
      metrics->write({{"phase", "sft"}, {"sft_step", state.sft_step}, {"loss", st.loss},
                      {"aux_loss", st.aux_loss}, {"grad_norm", st.grad_norm}, {"lr", st.lr},
                      {"seconds", st.seconds}});
      progress.update(state.sft_step, {{"loss", st.loss}});
    }
    progress.finish();
    if (t.checkpoint_every > 0 || t.steps == 0) checkpoint();
  }

  rollout::EvalResult eval(const char* label) {
    rollout::EvalConfig ec{.num_prompts = cfg.train.eval_prompts,
                           .max_new_tokens = cfg.rollout.gen.max_new_tokens};
    rollout::EvalResult e = rollout::evaluate(*policy, *tok, *cfg.task, *cfg.reward, ec);
    MOERL_LOG(INFO) << "eval " << label << ": mean reward " << e.mean_reward << ", exact "
                    << e.exact_fraction << " over " << e.num_prompts << " held-out prompts (" << e.seconds << " s)";
    return e;
  }

  void rl_phase() {
    const TrainSection& t = cfg.train;
    const int64_t G = cfg.loss.group_size;
    if (cfg.loss.kl_coef > 0) {
      // Frozen reference = the policy as RL starts (the SFT result, or the resumed weights'
      // origin is not kept: a resumed run re-anchors on its restored policy).
      model::Params copy;
      for (const auto& [name, p] : policy->params()) copy[name] = p.detach().clone();
      reference = std::make_unique<model::Model>(policy->config(), std::move(copy));
      trainer = std::make_unique<PolicyTrainer>(*policy, reference.get(), cfg.train.trainer, tok->pad_id());
    }
    rollout::GroupRollout gen(*policy, *tok, *cfg.reward, cfg.rollout.gen, "sync-0");
    Progress progress("rl", t.steps, {.initial_step = state.rl_step, .unit = "step"});
    while (state.rl_step < t.steps) {
      double t0 = now_seconds();
      std::vector<runtime::TaskUnit> units;
      for (int64_t i = 0; i < cfg.rollout.prompts_per_step; ++i) {
        units.push_back(rollout::make_task_unit(cfg.task->item(tasks::Split::kTrain, state.cursor), *tok,
                                                static_cast<uint32_t>(G), state.cursor));
        ++state.cursor;
      }
      std::vector<runtime::ExperienceRecord> records =
          gen.run(units, mix_seed(t.seed, 1, state.rl_step), state.policy_version);
      double t1 = now_seconds();
      StepStats st = trainer->train_step(records);
      double t2 = now_seconds();
      ++state.rl_step;
      ++state.policy_version;
      int64_t resp_tokens = 0, all_tokens = 0;
      for (const auto& r : records) {
        resp_tokens += runtime::total_response_tokens(r);
        for (const auto& s : r.samples) all_tokens += s.prompt_tokens.size() + s.response_tokens.size();
      }
      rl_seconds += t2 - t0;
      gen_seconds += t1 - t0;
      train_seconds += t2 - t1;
      rl_samples += st.num_samples;
      gen_tokens += resp_tokens;
      train_tokens += all_tokens;
      nlohmann::json row = {{"phase", "rl"}, {"step", state.rl_step}, {"reward", st.reward_mean},
                            {"reward_std", st.reward_std}, {"loss", st.loss}, {"pg_loss", st.pg_loss},
                            {"value_loss", st.value_loss}, {"kl", st.kl}, {"entropy", st.entropy},
                            {"aux_loss", st.aux_loss}, {"clip_frac", st.clip_frac},
                            {"approx_kl", st.approx_kl}, {"grad_norm", st.grad_norm}, {"lr", st.lr},
                            {"response_len", st.response_len}, {"samples", st.num_samples},
                            {"rollout_s", t1 - t0}, {"train_s", t2 - t1},
                            {"rollout_tokens_per_s", resp_tokens / std::max(1e-9, t1 - t0)}};
      if (t.eval_every > 0 && state.rl_step % t.eval_every == 0 && state.rl_step < t.steps) {
        rollout::EvalResult e = eval("periodic");
        row["eval_reward"] = e.mean_reward;
      }
      metrics->write(row);
      progress.update(state.rl_step, {{"reward", st.reward_mean}, {"loss", st.loss},
                                      {"tok/s", resp_tokens / std::max(1e-9, t1 - t0)}});
      if (t.checkpoint_every > 0 && state.rl_step % t.checkpoint_every == 0 && state.rl_step < t.steps) {
        checkpoint();
      }
      if (opts.stop_after_rl_steps > 0 && state.rl_step >= opts.stop_after_rl_steps && state.rl_step < t.steps) {
        checkpoint();
        stopped_early = true;
        break;
      }
    }
    progress.finish();
  }

  nlohmann::json run() {
    double start = now_seconds();
    setup();
    sft_phase();
    if (!state.extra.contains("eval_sft")) {
      rollout::EvalResult e = eval("after SFT");
      state.extra["eval_sft"] = {{"mean_reward", e.mean_reward}, {"exact", e.exact_fraction}};
    }
    rl_phase();
    if (stopped_early) {
      MOERL_LOG(INFO) << "train: stopped after RL step " << state.rl_step << " (checkpointed; rerun to resume)";
      return {{"stopped_at_rl_step", state.rl_step}};
    }
    rollout::EvalResult fin = eval("final");
    checkpoint();
    policy->save((fs::path(opts.run_dir) / "final_model").string());
    tok->save((fs::path(opts.run_dir) / "final_model").string());
    if (cfg.loss.uses_critic()) {  // a PPO run's final model doubles as a reward model
      io::save_tensors((fs::path(opts.run_dir) / "final_model" / kValueHeadFile).string(), trainer->value_head());
    }
    double wall = now_seconds() - start;
    nlohmann::json summary = {
        {"task", cfg.task->name()},
        {"algorithm", rl::name_of(cfg.loss.algorithm)},
        {"adv_estimator", rl::name_of(cfg.loss.adv_estimator)},
        {"mode", "sync"},
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
          {"rollout_tokens_per_s", gen_tokens / std::max(1e-9, gen_seconds)},
          {"train_tokens_per_s", train_tokens / std::max(1e-9, train_seconds)}}},
        {"wall_s", wall}};
    write_text_atomic(fs::path(opts.run_dir) / "summary.json", summary.dump(2) + "\n");
    if (opts.plot) {
      MetricsPlotSpec spec;
      spec.panels = {"reward", "loss", "grad_norm", "response_len"};
      spec.title = "moerl train: " + cfg.task->name() + " / " + rl::name_of(cfg.loss.algorithm);
      plot_metrics_jsonl((fs::path(opts.run_dir) / "metrics.jsonl").string(),
                                  (fs::path(opts.run_dir) / "plot.png").string(), spec);
    }
    MOERL_LOG(INFO) << "train: done in " << wall << " s; eval " << summary["eval"]["sft"] << " (SFT) -> "
                    << fin.mean_reward << " (final); run dir " << opts.run_dir;
    return summary;
  }
};

}  // namespace

nlohmann::json run_job(const JobConfig& cfg, const JobOptions& options) {
  Job job(cfg, options);
  return job.run();
}

}  // namespace moerl::train
