#include "train/job.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>

#include "base/deadline.h"
#include "base/env.h"
#include "base/error.h"
#include "base/jsonl.h"
#include "base/log.h"
#include "base/metrics_plot.h"
#include "base/progress.h"
#include "model/tokenizer.h"
#include "rollout/evaluate.h"
#include "rollout/group_rollout.h"
#include "runtime/kept_fraction.h"
#include "store/commit.h"
#include "store/object_store.h"
#include "io/tensor_io.h"
#include "train/checkpoint.h"
#include "train/dp_sync.h"
#include "train/ep_checkpoint.h"
#include "train/reward_model.h"

namespace moerl::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* kCheckpointRoot = "ckpt";
constexpr double kEpTimeoutS = 120;  // every collective wait of an EP job

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
  std::unique_ptr<metrics::JsonlWriter> metrics;  // rank 0 only
  // Expert parallelism (ep.size > 1, under `moerl launch`): the EP group the model's MoE
  // blocks use, and the data-parallel group of the dense replicas. Null on one rank.
  std::shared_ptr<ep::Group> ep_group;
  std::shared_ptr<DataParallel> dp;
  int rank = 0, world = 1;
  TrainerState state;
  // Accumulated over this process's RL steps, for throughput.
  double rl_seconds = 0, gen_seconds = 0, train_seconds = 0;
  int64_t rl_samples = 0, gen_tokens = 0, train_tokens = 0;
  // Dynamic sampling: the fraction of groups kept, and the groups not trained.
  runtime::KeptFraction kept_fraction;
  int64_t groups_filtered = 0, groups_surplus = 0;
  bool stopped_early = false;

  Job(const JobConfig& c, JobOptions o) : cfg(c), opts(std::move(o)) {}

  bool lead() const { return rank == 0; }
  ProgressOptions progress_options(int64_t initial_step) const {
    ProgressOptions o;
    o.style = lead() ? ProgressStyle::kAuto : ProgressStyle::kOff;  // one display: rank 0's
    o.initial_step = initial_step;
    o.unit = "step";
    return o;
  }
  std::function<bool(bool)> lockstep() { return dp ? dp->all_done_fn() : nullptr; }

  // ep.size > 1: check the launch, then join the EP group and the data-parallel group.
  void setup_ep() {
    const env::Rendezvous rdv = env::rendezvous();
    const std::string R = std::to_string(cfg.ep_size);
    if (cfg.ep_size == 1) {
      if (rdv.world_size > 1) {
        throw Error("train: WORLD_SIZE=" + std::to_string(rdv.world_size) +
                        " but ep.size=1: every rank would run the whole job into the same run dir",
                    "set [ep] size = " + std::to_string(rdv.world_size) + " (--set ep.size=" +
                        std::to_string(rdv.world_size) + "), or run `moerl train` without `moerl launch`");
      }
      return;
    }
    if (rdv.world_size != cfg.ep_size) {
      throw Error("train: ep.size=" + R + " needs " + R + " ranks but WORLD_SIZE=" + std::to_string(rdv.world_size),
                  "start one process per EP rank: moerl launch -n " + R + " -- moerl train CONFIG.toml ...");
    }
    if (cfg.ep_backend == "loopback") {
      throw Error("train: ep.size=" + R + " with ep.backend=\"loopback\" (one rank only)",
                  "set [ep] backend = \"fabric\" (or \"alltoall\", the c10d baseline)");
    }
    auto divisible = [&](const char* key, int64_t v) {
      if (v % cfg.ep_size != 0) {
        throw Error("train: " + std::string(key) + "=" + std::to_string(v) + " must be a multiple of ep.size=" + R +
                        " (each rank takes an equal share, and the ranks' forward calls must match)",
                    std::string("set ") + key + " to a multiple of " + R);
      }
    };
    divisible("rollout.prompts_per_step", cfg.rollout.prompts_per_step);
    if (cfg.train.sft_steps > 0) divisible("train.sft_batch_size", cfg.train.sft_batch_size);
    divisible("train.eval_prompts", cfg.train.eval_prompts);
    io::HfConfig arch = cfg.model.init == "random"
                            ? cfg.model.arch
                            : io::HfConfig::load((fs::path(cfg.model.init) / "config.json").string());
    // Buffers for the largest forward: rows of a micro-batch, a rollout or an eval batch,
    // each at most max_position_embeddings tokens.
    const int64_t rl_rows = cfg.rollout.prompts_per_step / cfg.ep_size * cfg.loss.group_size;
    const int64_t mb = cfg.train.trainer.micro_batch_size;
    int64_t rows = std::max({std::min(mb, rl_rows), rl_rows,
                             std::min<int64_t>(rollout::EvalConfig{}.batch_size, cfg.train.eval_prompts / cfg.ep_size)});
    if (cfg.train.sft_steps > 0) rows = std::max(rows, std::min(mb, cfg.train.sft_batch_size / cfg.ep_size));
    ep::Config ec;
    ec.backend = ep::parse_backend(cfg.ep_backend);
    ec.mode = ep::Mode::kNormal;
    ec.hidden = arch.hidden_size;
    ec.max_topk = arch.num_experts_per_tok;
    ec.max_tokens_per_rank = rows * arch.max_position_embeddings;
    ec.timeout_s = kEpTimeoutS;
    ep_group = ep::make_group(ec, arch.num_experts);
    dp = DataParallel::join(kEpTimeoutS);
    rank = dp->rank();
    world = dp->world_size();
    MOERL_LOG(INFO) << "train: rank " << rank << " of " << world << ", ep backend " << cfg.ep_backend
                    << ", experts " << rank * arch.num_experts / world << ".."
                    << (rank + 1) * arch.num_experts / world - 1 << ", buffers for " << ec.max_tokens_per_rank
                    << " tokens";
  }

  void setup() {
    setup_ep();
    fs::create_directories(opts.run_dir);
    if (lead()) write_text_atomic(fs::path(opts.run_dir) / "config.toml", cfg.effective_toml);
    if (cfg.train.threads > 0) at::set_num_threads(static_cast<int>(cfg.train.threads));
    model::ModelOptions mo = cfg.model.options(/*rollout=*/false);
    mo.ep_group = ep_group;
    if (cfg.model.init == "random") {
      tok = std::make_unique<model::CharTokenizer>();
      io::HfConfig arch = cfg.model.arch;
      arch.vocab_size = tok->vocab_size();
      arch.bos_token_id = tok->bos_id();
      arch.eos_token_id = tok->eos_id();
      arch.pad_token_id = tok->pad_id();
      arch.validate("[model]");
      policy = std::make_unique<model::Model>(model::init_random(arch, cfg.model.seed, mo));
    } else {
      tok = model::load_tokenizer(cfg.model.init);
      policy = std::make_unique<model::Model>(model::load_model(cfg.model.init, mo));
    }
    std::string uri = cfg.store_uri.empty() ? (fs::path(opts.run_dir) / "store").string() : cfg.store_uri;
    store = store::open_store(uri);
    trainer = std::make_unique<PolicyTrainer>(*policy, nullptr, cfg.train.trainer, tok->pad_id());
    trainer->set_data_parallel(dp);
    bool resumed = false;
    if (opts.resume) {
      std::optional<LoadedCheckpoint> loaded =
          dp ? load_ep_checkpoint(*store, kCheckpointRoot,
                                  (fs::path(opts.run_dir) / ("resume-rank" + std::to_string(rank))).string(), *dp)
             : load_latest_checkpoint(*store, kCheckpointRoot, (fs::path(opts.run_dir) / "resume").string());
      if (auto& ck = loaded) {
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
    if (lead()) {
      metrics = std::make_unique<metrics::JsonlWriter>(
          (fs::path(opts.run_dir) / "metrics.jsonl").string(),
          resumed ? metrics::JsonlMode::kAppend : metrics::JsonlMode::kTruncate);
    }
    MOERL_LOG(INFO) << "train: " << policy->num_parameters() << " parameters, task " << cfg.task->name()
                    << ", store " << uri << (resumed ? ", resumed" : "");
  }

  void checkpoint() {
    std::string prefix =
        dp ? save_ep_checkpoint(*store, kCheckpointRoot, state, *policy, *tok, *trainer, cfg.train.keep_checkpoints, *dp)
           : save_checkpoint(*store, kCheckpointRoot, state, *policy, *tok, *trainer, cfg.train.keep_checkpoints);
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
    Progress progress("sft", t.sft_steps, progress_options(state.sft_step));
    while (state.sft_step < t.sft_steps) {
      std::vector<runtime::Sample> batch;
      std::vector<tasks::TaskItem> items = cfg.task->items(tasks::Split::kTrain, state.cursor, t.sft_batch_size);
      for (size_t i = static_cast<size_t>(rank); i < items.size(); i += static_cast<size_t>(world)) {
        batch.push_back(sft_sample(items[i]));  // rank r takes items r, r+R, ...
      }
      state.cursor += t.sft_batch_size;
      StepStats st = trainer->sft_step(batch, sched.at(state.sft_step));
      ++state.sft_step;
      if (dp) {
        std::vector<double> m = dp->mean({st.loss, st.aux_loss, st.seconds});
        st.loss = m[0], st.aux_loss = m[1], st.seconds = m[2];
      }
      if (metrics) metrics->write({{"phase", "sft"}, {"sft_step", state.sft_step}, {"loss", st.loss},
                      {"aux_loss", st.aux_loss}, {"grad_norm", st.grad_norm}, {"lr", st.lr},
                      {"seconds", st.seconds}});
      progress.update(state.sft_step, {{"loss", st.loss}});
    }
    progress.finish();
    // With no RL steps to follow, run()'s final checkpoint is this state (plus the SFT eval):
    // committing both under one step name would clash.
    if (t.checkpoint_every > 0 && t.steps > 0) checkpoint();
  }

  rollout::EvalResult eval(const char* label) {
    rollout::EvalConfig ec{.num_prompts = cfg.train.eval_prompts,
                           .max_new_tokens = cfg.rollout.gen.max_new_tokens,
                           .shard = rank,
                           .num_shards = world,
                           .all_done = lockstep()};
    rollout::EvalResult e = rollout::evaluate(*policy, *tok, *cfg.task, *cfg.reward, ec);
    if (dp) {  // every rank scored its shard: sum, then the means over all prompts
      const double n = static_cast<double>(e.num_prompts);
      std::vector<double> s = dp->sum({e.mean_reward * n, e.exact_fraction * n, n, e.seconds});
      e.num_prompts = static_cast<int64_t>(s[2]);
      e.mean_reward = s[0] / std::max(1.0, s[2]);
      e.exact_fraction = s[1] / std::max(1.0, s[2]);
      e.seconds = s[3] / world;
    }
    MOERL_LOG(INFO) << "eval " << label << ": mean reward " << e.mean_reward << ", exact "
                    << e.exact_fraction << " over " << e.num_prompts << " held-out prompts (" << e.seconds << " s)";
    return e;
  }

  // One rank's step statistics -> the whole step's: losses and token means averaged over
  // ranks (each rank's loss is normalised over its own batch: the objective is their mean),
  // reward mean/std over all samples, samples and tokens summed, phase times averaged.
  void average_over_ranks(StepStats& st, int64_t& resp_tokens, int64_t& all_tokens, double t0, double& t1,
                          double& t2) {
    const double n = static_cast<double>(st.num_samples);
    const double sum = st.reward_mean * n, sumsq = st.reward_std * st.reward_std * (n - 1) + n * st.reward_mean * st.reward_mean;
    std::vector<double> s = dp->sum({sum, sumsq, n, static_cast<double>(resp_tokens), static_cast<double>(all_tokens),
                                     st.response_len * n, st.loss, st.pg_loss, st.value_loss, st.kl, st.entropy,
                                     st.aux_loss, st.clip_frac, st.approx_kl, st.behav_weight, t1 - t0, t2 - t1});
    const double N = std::max(1.0, s[2]), R = world;
    st.num_samples = static_cast<int64_t>(s[2]);
    st.reward_mean = s[0] / N;
    st.reward_std = N > 1 ? std::sqrt(std::max(0.0, (s[1] - N * st.reward_mean * st.reward_mean) / (N - 1))) : 0.0;
    resp_tokens = static_cast<int64_t>(s[3]);
    all_tokens = static_cast<int64_t>(s[4]);
    st.response_len = s[5] / N;
    st.loss = s[6] / R, st.pg_loss = s[7] / R, st.value_loss = s[8] / R, st.kl = s[9] / R;
    st.entropy = s[10] / R, st.aux_loss = s[11] / R, st.clip_frac = s[12] / R, st.approx_kl = s[13] / R;
    st.behav_weight = s[14] / R;
    t1 = t0 + s[15] / R;
    t2 = t1 + s[16] / R;
  }

  // One step's experience: prompts_per_step prompts from the data cursor, generated with the
  // current policy. With dynamic sampling, groups whose rewards are all equal are set aside
  // and more rounds are drawn (sized by the fraction kept so far) until the step has
  // prompts_per_step groups or max_sampling_rounds x prompts_per_step prompts were drawn;
  // surplus groups of the last round are not trained; if none is kept, the newest
  // prompts_per_step groups are trained as drawn. *generated_tokens: all rounds' tokens.
  std::vector<runtime::ExperienceRecord> sample_step(rollout::GroupRollout& gen, int64_t* generated_tokens) {
    const TrainSection& t = cfg.train;
    const int64_t P = cfg.rollout.prompts_per_step;
    const bool dynamic = cfg.rollout.dynamic_sampling;  // one rank only (checked by JobConfig)
    const int64_t budget = dynamic ? P * cfg.rollout.max_sampling_rounds : P;
    std::vector<runtime::ExperienceRecord> kept, flat;  // flat: groups set aside, newest last
    int64_t drawn = 0;
    for (uint64_t round = 0; drawn < budget && static_cast<int64_t>(kept.size()) < P; ++round) {
      const double want = static_cast<double>(P - static_cast<int64_t>(kept.size()));
      const int64_t n = round == 0 ? P : std::min<int64_t>(budget - drawn, static_cast<int64_t>(std::ceil(
                                                            want / kept_fraction.value(0.05))));
      std::vector<runtime::TaskUnit> units;
      for (int64_t i = 0; i < n; ++i) {
        if (i % world == rank) {  // rank r takes prompts r, r+R, ...; a group stays on one rank
          units.push_back(rollout::make_task_unit(cfg.task->item(tasks::Split::kTrain, state.cursor), *tok,
                                                  static_cast<uint32_t>(cfg.loss.group_size), state.cursor));
        }
        ++state.cursor;
      }
      drawn += n;
      const uint64_t stream = 1 + (static_cast<uint64_t>(rank) << 32) + (round << 48);
      for (runtime::ExperienceRecord& r : gen.run(units, mix_seed(t.seed, stream, state.rl_step), state.policy_version)) {
        *generated_tokens += runtime::total_response_tokens(r);
        if (!dynamic) {
          kept.push_back(std::move(r));
          continue;
        }
        const bool signal = runtime::has_signal(r);
        kept_fraction.observe(signal);
        if (signal) {
          kept.push_back(std::move(r));
        } else {
          flat.push_back(std::move(r));
          ++groups_filtered;
        }
      }
    }
    if (static_cast<int64_t>(kept.size()) > P) {
      groups_surplus += static_cast<int64_t>(kept.size()) - P;
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
    return kept;
  }

  void rl_phase() {
    const TrainSection& t = cfg.train;
    if (cfg.loss.kl_coef > 0) {
      // Frozen reference = the policy as RL starts (the SFT result, or the resumed weights'
      // origin is not kept: a resumed run re-anchors on its restored policy).
      model::Params copy;
      for (const auto& [name, p] : policy->params()) copy[name] = p.detach().clone();
      model::ModelOptions mo;
      mo.ep_group = ep_group;  // the same experts as this rank's policy shard
      reference = std::make_unique<model::Model>(policy->config(), std::move(copy), mo);
      trainer = std::make_unique<PolicyTrainer>(*policy, reference.get(), cfg.train.trainer, tok->pad_id());
      trainer->set_data_parallel(dp);
    }
    rollout::RolloutConfig rc = cfg.rollout.gen;
    rc.all_done = lockstep();
    rollout::GroupRollout gen(*policy, *tok, *cfg.reward, rc, "sync-" + std::to_string(rank));
    Progress progress("rl", t.steps, progress_options(state.rl_step));
    while (state.rl_step < t.steps) {
      double t0 = now_seconds();
      int64_t generated_tokens = 0;
      std::vector<runtime::ExperienceRecord> records = sample_step(gen, &generated_tokens);
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
      if (dp) {
        average_over_ranks(st, resp_tokens, all_tokens, t0, t1, t2);
        generated_tokens = resp_tokens;  // all ranks' (no dynamic sampling with ep.size > 1)
      }
      rl_seconds += t2 - t0;
      gen_seconds += t1 - t0;
      train_seconds += t2 - t1;
      rl_samples += st.num_samples;
      gen_tokens += generated_tokens;
      train_tokens += all_tokens;
      nlohmann::json row = {{"phase", "rl"}, {"step", state.rl_step}, {"reward", st.reward_mean},
                            {"reward_std", st.reward_std}, {"loss", st.loss}, {"pg_loss", st.pg_loss},
                            {"value_loss", st.value_loss}, {"kl", st.kl}, {"entropy", st.entropy},
                            {"aux_loss", st.aux_loss}, {"clip_frac", st.clip_frac},
                            {"approx_kl", st.approx_kl}, {"grad_norm", st.grad_norm}, {"lr", st.lr},
                            {"response_len", st.response_len}, {"samples", st.num_samples},
                            {"rollout_s", t1 - t0}, {"train_s", t2 - t1},
                            {"rollout_tokens_per_s", generated_tokens / std::max(1e-9, t1 - t0)}};
      row["flat_groups"] = std::count_if(records.begin(), records.end(),
                                         [](const runtime::ExperienceRecord& r) { return !runtime::has_signal(r); });
      if (cfg.rollout.dynamic_sampling) row["groups_filtered"] = groups_filtered;
      if (t.eval_every > 0 && state.rl_step % t.eval_every == 0 && state.rl_step < t.steps) {
        rollout::EvalResult e = eval("periodic");
        row["eval_reward"] = e.mean_reward;
      }
      if (metrics) metrics->write(row);
      progress.update(state.rl_step, {{"reward", st.reward_mean}, {"loss", st.loss},
                                      {"tok/s", generated_tokens / std::max(1e-9, t1 - t0)}});
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
    const std::string final_dir = (fs::path(opts.run_dir) / "final_model").string();
    if (dp) {
      save_sharded_model(final_dir, *policy, *tok, *dp);
    } else {
      policy->save(final_dir);
      tok->save(final_dir);
    }
    if (cfg.loss.uses_critic() && lead()) {  // a PPO run's final model doubles as a reward model
      io::save_tensors((fs::path(final_dir) / kValueHeadFile).string(), trainer->value_head());
    }
    int64_t num_parameters = policy->num_parameters();
    if (dp) {  // dense once, every rank's experts
      double experts = 0;
      for (const auto& [name, p] : policy->params()) {
        if (is_expert_param(name)) experts += static_cast<double>(p.numel());
      }
      num_parameters += static_cast<int64_t>(dp->sum({experts})[0] - experts);
    }
    double wall = now_seconds() - start;
    nlohmann::json summary = {
        {"task", cfg.task->name()},
        {"algorithm", rl::name_of(cfg.loss.algorithm)},
        {"adv_estimator", rl::name_of(cfg.loss.adv_estimator)},
        {"mode", "sync"},
        {"steps", {{"sft", state.sft_step}, {"rl", state.rl_step}}},
        {"parameters", num_parameters},
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
    if (cfg.rollout.dynamic_sampling) {
      summary["sampling"] = {{"groups_filtered", groups_filtered}, {"groups_surplus", groups_surplus}};
    }
    if (dp) summary["ep"] = {{"size", world}, {"backend", cfg.ep_backend}};
    if (!lead()) return summary;  // rank 0 writes the run dir's files
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
