#include "job/run_context.h"

#include <ATen/Parallel.h>

#include <filesystem>
#include <optional>

#include "base/error.h"
#include "base/check.h"
#include "base/files.h"
#include "base/log.h"
#include "io/tensor_io.h"
#include "job/chat_prompts.h"
#include "job/ep_join.h"
#include "job/gpu_paths.h"
#include "job/metrics_endpoint.h"
#include "model/expert_names.h"
#include "store/commit.h"
#include "train/ep_checkpoint.h"
#include "train/reward_model.h"

namespace moerl::job {

namespace fs = std::filesystem;

namespace {

// Objects of checkpoints a crashed process never committed (and pending uploads) older than
// this are garbage; younger ones may belong to a writer still at work (EP ranks stage first).
constexpr double kOrphanGraceSeconds = 3600;

void collect_orphaned_checkpoint_objects(store::ObjectStore& store) {
  store::CleanupReport r = store::cleanup(store, kCheckpointRoot, kOrphanGraceSeconds);
  if (!r.removed_objects.empty() || !r.aborted_uploads.empty()) {
    MOERL_LOG(INFO) << "checkpoint: removed " << r.removed_objects.size() << " object(s) of uncommitted checkpoints and "
                    << "aborted " << r.aborted_uploads.size() << " upload(s) older than " << kOrphanGraceSeconds
                    << " s under " << store.uri() << "/" << kCheckpointRoot << " (`moerl store cleanup` does it by hand)";
  }
}

}  // namespace

std::unique_ptr<model::Tokenizer> make_job_tokenizer(const JobConfig& cfg) {
  if (cfg.model.init == "random") return std::make_unique<model::CharTokenizer>();
  return model::load_tokenizer(cfg.model.init);
}

model::Model make_job_model(const JobConfig& cfg, const model::Tokenizer& tok, const model::ModelOptions& options) {
  if (cfg.model.init != "random") return model::load_model(cfg.model.init, options);
  io::HfConfig arch = cfg.model.arch;
  arch.vocab_size = tok.vocab_size();
  arch.bos_token_id = tok.bos_id();
  arch.eos_token_id = tok.eos_id();
  arch.pad_token_id = tok.pad_id();
  arch.validate("[model]");
  return model::init_random(arch, cfg.model.seed, options);
}

std::string tokenizer_source(const JobConfig& cfg) {
  return cfg.model.init == "random" ? "the character tokenizer of model.init = \"random\""
                                    : "the tokenizer in " + cfg.model.init;
}

std::string job_store_uri(const JobConfig& cfg, const std::string& run_dir) {
  return cfg.store_uri.empty() ? (fs::path(run_dir) / "store").string() : cfg.store_uri;
}

RunContext::RunContext(const JobConfig& c, JobOptions o) : cfg(c), opts(std::move(o)) {
  enable_gpu_paths_for(cfg);
  EpJoin ep = join_ep(cfg);
  ep_group = std::move(ep.group);
  dp = std::move(ep.dp);
  if (dp) {
    rank = dp->rank();
    world = dp->world_size();
  }
  fs::create_directories(opts.run_dir);
  if (lead()) {
    write_file_atomic(path("config.toml"), cfg.effective_toml);
    const bool async = cfg.runtime.mode == runtime::RunMode::kAsync;
    role = async ? "trainer" : "train";
    metrics_endpoint = start_metrics_endpoint(cfg.metrics, role,
                                              {{"mode", async ? "async" : "sync"}, {"task", cfg.task->name()},
                                               {"algorithm", rl::name_of(cfg.loss.algorithm)}});
  }
  const int threads = opts.intra_op_threads > 0 ? opts.intra_op_threads : static_cast<int>(cfg.train.threads);
  if (threads > 0) at::set_num_threads(threads);
  model::ModelOptions mo = cfg.model.options(/*rollout=*/false);
  mo.ep_group = ep_group;
  tok = make_job_tokenizer(cfg);
  task = task_for_tokenizer(cfg.task, cfg.chat, *tok, tokenizer_source(cfg));
  policy = std::make_unique<model::Model>(make_job_model(cfg, *tok, mo));
  const std::string uri = job_store_uri(cfg, opts.run_dir);
  store = store::open_store(uri);
  trainer = std::make_unique<train::PolicyTrainer>(*policy, nullptr, cfg.train.trainer, tok->pad_id());
  trainer->set_data_parallel(dp);
  if (opts.resume) resume();
  if (lead()) {
    metrics = std::make_unique<RunMetrics>(opts.run_dir, resumed ? metrics::JsonlMode::kAppend : metrics::JsonlMode::kTruncate,
                                           cfg.metrics);
  }
  MOERL_LOG(INFO) << "train: " << policy->num_parameters() << " parameters, task " << cfg.task->name() << ", store "
                  << uri << (resumed ? ", resumed at step " + std::to_string(state.rl_step) : "");
}

void RunContext::resume() {
  if (lead()) collect_orphaned_checkpoint_objects(*store);
  std::optional<train::LoadedCheckpoint> loaded =
      dp ? train::load_ep_checkpoint(*store, kCheckpointRoot, path("resume-rank" + std::to_string(rank)), *dp)
         : train::load_latest_checkpoint(*store, kCheckpointRoot, path("resume"));
  if (loaded) {
    train::restore(*loaded, *policy, *trainer);
    state = loaded->state;
    resumed = true;
    commit_prefix_ = loaded->prefix;
    commit_opt_steps_ = trainer->optimizer().num_steps();
    auto ref = state.extra.find("reference");
    if (cfg.loss.kl_coef > 0 && ref != state.extra.end()) load_reference(ref->get<std::string>());
    return;
  }
  // No usable commit. A manifest that exists but cannot be read is an unreadable checkpoint,
  // not a fresh start: open it to raise the reader's error.
  const std::string suffix = std::string("/") + store::kManifestName;
  for (const auto& obj : store->list(std::string(kCheckpointRoot) + "/")) {
    if (obj.key.size() > suffix.size() && obj.key.ends_with(suffix)) {
      store::CommitReader::open(*store, obj.key.substr(0, obj.key.size() - suffix.size()));
    }
  }
}

std::string RunContext::path(const std::string& name) const { return (fs::path(opts.run_dir) / name).string(); }

ProgressOptions RunContext::progress_options(int64_t initial_step) const {
  ProgressOptions o;
  o.style = lead() ? ProgressStyle::kAuto : ProgressStyle::kOff;  // one display: rank 0's
  o.initial_step = initial_step;
  o.unit = "step";
  return o;
}

std::function<bool(bool)> RunContext::lockstep() const { return dp ? dp->all_done_fn() : nullptr; }

std::string RunContext::checkpoint() {
  const int64_t keep = cfg.train.keep_checkpoints;
  std::string prefix =
      dp ? train::save_ep_checkpoint(*store, kCheckpointRoot, state, *policy, *tok, *trainer, keep, *dp)
         : train::save_checkpoint(*store, kCheckpointRoot, state, *policy, *tok, *trainer, keep);
  MOERL_LOG(INFO) << "checkpoint: committed " << prefix;
  commit_prefix_ = prefix;
  commit_opt_steps_ = trainer->optimizer().num_steps();
  return prefix;
}

std::string RunContext::policy_commit() const {
  return commit_opt_steps_ == trainer->optimizer().num_steps() ? commit_prefix_ : std::string();
}

rollout::EvalResult RunContext::eval(const char* label) {
  rollout::EvalConfig ec{.num_prompts = cfg.train.eval_prompts,
                         .max_new_tokens = cfg.rollout.gen.max_new_tokens,
                         .shard = rank,
                         .num_shards = world,
                         .all_done = lockstep(),
                         .stop = cfg.rollout.gen.stop};
  rollout::EvalResult e = rollout::evaluate(*policy, *tok, *task, *cfg.reward, ec);
  if (dp) {  // every rank scored its shard: sum, then the means over all prompts
    const double n = static_cast<double>(e.num_prompts);
    std::vector<double> s = dp->sum({e.mean_reward * n, e.exact_fraction * n, n, e.seconds});
    e.num_prompts = static_cast<int64_t>(s[2]);
    e.mean_reward = s[0] / std::max(1.0, s[2]);
    e.exact_fraction = s[1] / std::max(1.0, s[2]);
    e.seconds = s[3] / world;
  }
  MOERL_LOG(INFO) << "eval " << label << ": mean reward " << e.mean_reward << ", exact " << e.exact_fraction
                  << " over " << e.num_prompts << " held-out prompts (" << e.seconds << " s)";
  return e;
}

std::unique_ptr<model::Model> RunContext::policy_copy() const {
  model::Params copy;
  for (const auto& [name, p] : policy->state()) copy[name] = p.detach().clone();  // buffers too
  model::ModelOptions mo = cfg.model.options(/*rollout=*/false);
  mo.ep_group = ep_group;  // the same experts as this rank's policy shard
  return std::make_unique<model::Model>(policy->config(), std::move(copy), mo);
}

void RunContext::pin_reference(const std::string& prefix) {
  MOERL_CHECK(!prefix.empty() && prefix == policy_commit()) << "the reference must be the committed policy";
  reference = policy_copy();
  trainer->set_reference(reference.get());
  state.extra["reference"] = prefix;
  MOERL_LOG(INFO) << "train: KL reference = the policy of checkpoint " << prefix;
}

void RunContext::load_reference(const std::string& prefix) {
  std::optional<store::CommitReader> r;
  try {
    r = store::CommitReader::open(*store, prefix);
  } catch (const Error& e) {
    throw Error("resume: the KL reference checkpoint " + store->uri() + "/" + prefix +
                    " cannot be read: " + e.what(),
                "it is pinned by the run's state and must not be deleted; restore it, or start fresh (--fresh)",
                ErrorCode::kIo);
  }
  const std::string scratch = path("reference-rank" + std::to_string(rank));
  const std::string dir = train::fetch_commit_model(*r, scratch);
  reference = policy_copy();
  reference->load_weights(io::load_tensors(dir));
  remove_tree(scratch);
  trainer->set_reference(reference.get());
  MOERL_LOG(INFO) << "resume: KL reference loaded from " << prefix;
}

int64_t RunContext::num_parameters() {
  int64_t n = policy->num_parameters();
  if (!dp) return n;
  double experts = 0;  // dense once, every rank's experts
  for (const auto& [name, p] : policy->params()) {
    if (model::is_routed_expert(name)) experts += static_cast<double>(p.numel());
  }
  return n + static_cast<int64_t>(dp->sum({experts})[0] - experts);
}

void RunContext::save_final_model(const std::string& dir) {
  if (dp) {
    train::save_sharded_model(dir, *policy, *tok, *dp);
  } else {
    policy->save(dir);
    tok->save(dir);
  }
  if (cfg.loss.uses_critic() && lead()) {  // a PPO run's final model doubles as a reward model
    io::save_tensors((fs::path(dir) / train::kValueHeadFile).string(), trainer->value_head());
  }
}

}  // namespace moerl::job
