#include "job/trainer_loop.h"

#include <algorithm>
#include <cmath>

#include "base/deadline.h"
#include "base/files.h"
#include "base/log.h"
#include "base/metrics_plot.h"
#include "job/metrics_endpoint.h"
#include "base/progress.h"
#include "train/schedule.h"

namespace moerl::job {

namespace {

using train::StepStats;

// Sums over this process's RL steps, for the throughput figures.
struct Totals {
  double step_seconds = 0, train_seconds = 0, generate_seconds = 0;
  int64_t samples = 0, generated_tokens = 0, train_tokens = 0, response_tokens = 0;
};

runtime::Sample sft_sample(const model::Tokenizer& tok, const tasks::TaskItem& it) {
  runtime::Sample s;
  for (int64_t id : tok.encode(it.prompt, true)) s.prompt_tokens.push_back(static_cast<int32_t>(id));
  for (int64_t id : tok.encode(it.sft_target(), false)) s.response_tokens.push_back(static_cast<int32_t>(id));
  s.response_tokens.push_back(static_cast<int32_t>(tok.eos_id()));
  s.behaviour_logprobs.assign(s.response_tokens.size(), 0.f);
  return s;
}

// Adds the step's skipped (non-finite) updates to the run's count, kept in the checkpointed
// state; returns the count so far.
int64_t count_skipped(train::TrainerState& state, const StepStats& st) {
  const int64_t n = state.extra.value("steps_skipped_nonfinite", int64_t{0}) + st.skipped_nonfinite;
  state.extra["steps_skipped_nonfinite"] = n;
  return n;
}

// Commits the state with the source's snapshot in it.
void checkpoint(RunContext& ctx, ExperienceSource& source) {
  nlohmann::json snap = source.snapshot();
  if (!snap.is_null()) ctx.state.extra["source"] = std::move(snap);
  ctx.checkpoint();
  source.checkpoint_committed();
}

void sft_phase(RunContext& ctx, ExperienceSource& source) {
  const TrainSection& t = ctx.cfg.train;
  train::TrainerState& state = ctx.state;
  if (state.sft_step >= t.sft_steps) return;
  train::LrSchedule sched{.lr = t.sft_lr, .warmup_steps = std::min<int64_t>(10, t.sft_steps / 10),
                          .total_steps = t.sft_steps, .min_lr_ratio = 0.1};
  Progress progress("sft", t.sft_steps, ctx.progress_options(state.sft_step));
  while (state.sft_step < t.sft_steps) {
    std::vector<runtime::Sample> batch;
    std::vector<tasks::TaskItem> items = ctx.task->items(tasks::Split::kTrain, state.cursor, t.sft_batch_size);
    for (size_t i = static_cast<size_t>(ctx.rank); i < items.size(); i += static_cast<size_t>(ctx.world)) {
      batch.push_back(sft_sample(*ctx.tok, items[i]));  // rank r takes items r, r+R, ...
    }
    state.cursor += t.sft_batch_size;
    StepStats st = ctx.trainer->sft_step(batch, sched.at(state.sft_step));
    ++state.sft_step;
    const int64_t skipped = count_skipped(state, st);
    if (ctx.dp) {
      std::vector<double> m = ctx.dp->mean({st.loss, st.aux_loss, st.seconds});
      st.loss = m[0], st.aux_loss = m[1], st.seconds = m[2];
    }
    if (ctx.metrics) {
      ctx.metrics->write({{"phase", "sft"}, {"sft_step", state.sft_step}, {"loss", st.loss},
                          {"aux_loss", st.aux_loss}, {"grad_norm", st.grad_norm}, {"lr", st.lr},
                          {"steps_skipped_nonfinite", skipped}, {"seconds", st.seconds}});
    }
    progress.update(state.sft_step, {{"loss", st.loss}});
  }
  progress.finish();
  // RL follows: keep the warm start, so a restart does not redo it. (With no RL steps the
  // final checkpoint is this state: committing both under one step name would clash.)
  if (t.steps > 0) checkpoint(ctx, source);
}

// kl_coef > 0: the KL reference is the policy as RL starts, pinned by a checkpoint of it (the
// one SFT ended with, or one committed now), so a resumed run reloads that same reference.
void anchor_reference(RunContext& ctx, ExperienceSource& source) {
  if (ctx.cfg.loss.kl_coef <= 0 || ctx.trainer->has_reference()) return;
  if (ctx.policy_commit().empty()) checkpoint(ctx, source);
  ctx.pin_reference(ctx.policy_commit());
}

// One rank's step statistics -> the whole step's: losses and token means averaged over
// ranks (each rank's loss is normalised over its own batch: the objective is their mean),
// reward mean/std over all samples, samples and tokens summed, phase times averaged; the
// source's generation figures and flat groups summed (StepExperience says how each source
// splits them over ranks).
void average_over_ranks(train::DataParallel& dp, StepStats& st, int64_t& resp_tokens, int64_t& all_tokens,
                        double (&phase_s)[3], StepExperience& exp, int64_t& flat_groups) {
  const double n = static_cast<double>(st.num_samples);
  const double sum = st.reward_mean * n;
  const double sumsq = st.reward_std * st.reward_std * (n - 1) + n * st.reward_mean * st.reward_mean;
  std::vector<double> s = dp.sum({sum, sumsq, n, static_cast<double>(resp_tokens), static_cast<double>(all_tokens),
                                  st.response_len * n, st.loss, st.pg_loss, st.value_loss, st.kl, st.entropy,
                                  st.aux_loss, st.clip_frac, st.approx_kl, st.behav_weight, phase_s[0], phase_s[1],
                                  phase_s[2], st.behav_capped_frac, st.mismatch_abs, st.mismatch_kl,
                                  static_cast<double>(exp.generated_tokens), exp.generate_seconds,
                                  static_cast<double>(flat_groups)});
  const double N = std::max(1.0, s[2]), R = dp.world_size();
  st.num_samples = static_cast<int64_t>(s[2]);
  st.reward_mean = s[0] / N;
  st.reward_std = N > 1 ? std::sqrt(std::max(0.0, (s[1] - N * st.reward_mean * st.reward_mean) / (N - 1))) : 0.0;
  resp_tokens = static_cast<int64_t>(s[3]);
  all_tokens = static_cast<int64_t>(s[4]);
  st.response_len = s[5] / N;
  st.loss = s[6] / R, st.pg_loss = s[7] / R, st.value_loss = s[8] / R, st.kl = s[9] / R;
  st.entropy = s[10] / R, st.aux_loss = s[11] / R, st.clip_frac = s[12] / R, st.approx_kl = s[13] / R;
  st.behav_weight = s[14] / R;
  for (int i = 0; i < 3; ++i) phase_s[i] = s[15 + i] / R;
  st.behav_capped_frac = s[18] / R, st.mismatch_abs = s[19] / R, st.mismatch_kl = s[20] / R;
  exp.generated_tokens = static_cast<int64_t>(s[21]);
  exp.generate_seconds = s[22];
  flat_groups = static_cast<int64_t>(s[23]);
}

// Runs RL steps until train.steps (or the source runs dry). False when stopped early
// (options.stop_after_rl_steps): checkpointed for a resume.
bool rl_phase(RunContext& ctx, ExperienceSource& source, Totals& tot) {
  const TrainSection& t = ctx.cfg.train;
  train::TrainerState& state = ctx.state;
  anchor_reference(ctx, source);
  source.start();
  Progress progress("rl", t.steps, ctx.progress_options(state.rl_step));
  while (state.rl_step < t.steps) {
    const double t0 = now_seconds();
    StepExperience exp = source.next_batch();
    const double t1 = now_seconds();
    if (exp.records.empty()) break;
    StepStats st = ctx.trainer->train_step(exp.records);
    const double t2 = now_seconds();
    ++state.rl_step;
    ++state.policy_version;
    source.after_step(exp);
    double phase_s[3] = {t1 - t0, t2 - t1, now_seconds() - t2};  // experience, train, after-step
    int64_t resp_tokens = 0, all_tokens = 0;
    for (const auto& r : exp.records) {
      resp_tokens += runtime::total_response_tokens(r);
      for (const auto& s : r.samples) all_tokens += s.prompt_tokens.size() + s.response_tokens.size();
    }
    int64_t flat_groups = std::count_if(exp.records.begin(), exp.records.end(),
                                        [](const runtime::ExperienceRecord& r) { return !runtime::has_signal(r); });
    if (ctx.dp) average_over_ranks(*ctx.dp, st, resp_tokens, all_tokens, phase_s, exp, flat_groups);
    const double step_s = phase_s[0] + phase_s[1] + phase_s[2];
    tot.step_seconds += step_s;
    tot.train_seconds += phase_s[1];
    tot.generate_seconds += exp.generate_seconds;
    tot.samples += st.num_samples;
    tot.generated_tokens += exp.generated_tokens;
    tot.train_tokens += all_tokens;
    tot.response_tokens += resp_tokens;
    const double gen_rate = exp.generated_tokens / std::max(1e-9, exp.generate_seconds);
    nlohmann::json row = {{"phase", "rl"}, {"step", state.rl_step}, {"reward", st.reward_mean},
                          {"reward_std", st.reward_std}, {"loss", st.loss}, {"pg_loss", st.pg_loss},
                          {"value_loss", st.value_loss}, {"kl", st.kl}, {"entropy", st.entropy},
                          {"aux_loss", st.aux_loss}, {"clip_frac", st.clip_frac}, {"approx_kl", st.approx_kl},
                          {"behav_weight", st.behav_weight}, {"behav_capped_frac", st.behav_capped_frac},
                          {"mismatch_abs", st.mismatch_abs}, {"mismatch_kl", st.mismatch_kl},
                          {"grad_norm", st.grad_norm}, {"lr", st.lr}, {"optimizer_steps", st.optimizer_steps},
                          {"steps_skipped_nonfinite", count_skipped(state, st)},
                          {"response_len", st.response_len}, {"samples", st.num_samples},
                          {"experience_s", phase_s[0]}, {"train_s", phase_s[1]}, {"step_s", step_s},
                          {"rollout_tokens_per_s", gen_rate}};
    row["flat_groups"] = flat_groups;
    row.update(exp.row);
    if (t.eval_every > 0 && state.rl_step % t.eval_every == 0 && state.rl_step < t.steps) {
      row["eval_reward"] = ctx.eval("periodic").mean_reward;
    }
    if (ctx.metrics) ctx.metrics->write(row);
    progress.update(state.rl_step, {{"reward", st.reward_mean}, {"loss", st.loss}, {"tok/s", gen_rate}});
    if (t.checkpoint_every > 0 && state.rl_step % t.checkpoint_every == 0 && state.rl_step < t.steps) {
      checkpoint(ctx, source);
    }
    const int64_t stop_after = ctx.opts.stop_after_rl_steps;
    if (stop_after > 0 && state.rl_step >= stop_after && state.rl_step < t.steps) {
      checkpoint(ctx, source);
      progress.finish();
      return false;
    }
  }
  progress.finish();
  return true;
}

nlohmann::json make_summary(RunContext& ctx, ExperienceSource& source, const rollout::EvalResult& fin,
                            const Totals& tot) {
  const JobConfig& cfg = ctx.cfg;
  const nlohmann::json& sft = ctx.state.extra["eval_sft"];
  nlohmann::json summary = {
      {"task", cfg.task->name()},
      {"algorithm", rl::name_of(cfg.loss.algorithm)},
      {"adv_estimator", rl::name_of(cfg.loss.adv_estimator)},
      {"mode", source.mode()},
      {"steps", {{"sft", ctx.state.sft_step}, {"rl", ctx.state.rl_step}}},
      {"parameters", ctx.num_parameters()},
      {"eval",
       {{"sft", sft["mean_reward"]},
        {"final", fin.mean_reward},
        {"sft_exact", sft["exact"]},
        {"final_exact", fin.exact_fraction},
        {"num_prompts", fin.num_prompts}}},
      {"throughput",
       {{"samples_per_s", tot.samples / std::max(1e-9, tot.step_seconds)},
        {"response_tokens_per_s", tot.response_tokens / std::max(1e-9, tot.step_seconds)},
        {"rollout_tokens_per_s", tot.generated_tokens / std::max(1e-9, tot.generate_seconds)},
        {"train_tokens_per_s", tot.train_tokens / std::max(1e-9, tot.train_seconds)},
        {"rl_seconds", tot.step_seconds},
        {"samples", tot.samples}}},
      {"policy_version", ctx.state.policy_version},
      {"steps_skipped_nonfinite", ctx.state.extra.value("steps_skipped_nonfinite", int64_t{0})}};
  if (ctx.dp) summary["ep"] = {{"size", ctx.world}, {"backend", cfg.ep_backend}};
  source.add_summary(summary);
  return summary;
}

}  // namespace

nlohmann::json run_trainer_loop(RunContext& ctx, ExperienceSource& source) {
  const double start = now_seconds();
  sft_phase(ctx, source);
  if (!ctx.state.extra.contains("eval_sft")) {
    rollout::EvalResult e = ctx.eval("after SFT");
    ctx.state.extra["eval_sft"] = {{"mean_reward", e.mean_reward}, {"exact", e.exact_fraction}};
  }
  Totals tot;
  if (!rl_phase(ctx, source, tot)) {
    MOERL_LOG(INFO) << "train: stopped after RL step " << ctx.state.rl_step << " (checkpointed; rerun to resume)";
    return {{"stopped_at_rl_step", ctx.state.rl_step}};
  }
  source.finish();
  rollout::EvalResult fin = ctx.eval("final");
  checkpoint(ctx, source);
  ctx.save_final_model(ctx.path("final_model"));
  nlohmann::json summary = make_summary(ctx, source, fin, tot);
  summary["wall_s"] = now_seconds() - start;
  if (!ctx.lead()) return summary;  // rank 0 writes the run dir's files
  write_file_atomic(ctx.path("summary.json"), summary.dump(2) + "\n");
  if (ctx.opts.plot) {
    MetricsPlotSpec spec;
    spec.panels = {"reward", "loss", "grad_norm", "response_len"};
    for (const std::string& p : source.plot_panels()) spec.panels.push_back(p);
    spec.title = "moerl train (" + std::string(source.mode()) + "): " + ctx.cfg.task->name() + " / " +
                 rl::name_of(ctx.cfg.loss.algorithm);
    plot_metrics_jsonl(ctx.path("metrics.jsonl"), ctx.path("plot.png"), spec);
  }
  MOERL_LOG(INFO) << "train: done in " << summary["wall_s"] << " s; eval " << summary["eval"]["sft"] << " (SFT) -> "
                  << fin.mean_reward << " (final); run dir " << ctx.opts.run_dir;
  finish_metrics_endpoint(ctx.metrics_endpoint.get(), ctx.cfg.metrics, ctx.role);
  return summary;
}

}  // namespace moerl::job
