#include "job/job_config.h"

#include "base/error.h"
#include "base/log.h"
#include "job/gpu_paths.h"
#include "tasks/registry.h"
#include "train/reward_model.h"

namespace moerl::job {

namespace {

constexpr double kBig = 1e12;

ModelSection read_model(ConfigTable t) {
  ModelSection m;
  m.init = t.string("init", "random");
  m.seed = static_cast<uint64_t>(t.integer("seed", 0, {0, kBig}));
  io::HfConfig& a = m.arch;
  a.model_type = t.choice("arch", "qwen3_moe", {"qwen3_moe", "mixtral"});
  a.hidden_size = t.integer("hidden_size", 64, {8, 65536});
  a.num_hidden_layers = t.integer("num_hidden_layers", 2, {1, 1024});
  a.num_attention_heads = t.integer("num_attention_heads", 4, {1, 1024});
  a.num_key_value_heads = t.integer("num_key_value_heads", 2, {1, 1024});
  a.head_dim = t.integer("head_dim", a.hidden_size / a.num_attention_heads, {1, 4096});
  a.num_experts = t.integer("num_experts", 8, {1, 4096});
  a.num_experts_per_tok = t.integer("num_experts_per_tok", 2, {1, 64});
  a.moe_intermediate_size = t.integer("moe_intermediate_size", 64, {1, 1 << 20});
  a.intermediate_size = t.integer("intermediate_size",
                                  a.model_type == "mixtral" ? a.moe_intermediate_size : 4 * a.hidden_size,
                                  {1, 1 << 20});
  if (a.model_type == "mixtral") a.moe_intermediate_size = a.intermediate_size;
  a.norm_topk_prob = t.boolean("norm_topk_prob", true);
  a.mlp_only_layers = t.integers("mlp_only_layers", {});
  a.tie_word_embeddings = t.boolean("tie_word_embeddings", false);
  a.rope_theta = t.number("rope_theta", 10000.0, {1, 1e9});
  a.max_position_embeddings = t.integer("max_position_embeddings", 256, {8, 1 << 24});
  a.rms_norm_eps = t.number("rms_norm_eps", 1e-6, {0, 1});
  m.device = t.string("device", "cpu");
  check_device_name(m.device, "config: model.device");
  m.dtype = parse_dtype(t.string("dtype", "float32"), "model.dtype", {DType::kFloat32, DType::kBFloat16});
  m.rollout_dtype = t.has("rollout_dtype") ? parse_dtype(t.string("rollout_dtype", ""), "model.rollout_dtype",
                                                         {DType::kFloat32, DType::kBFloat16})
                                           : m.dtype;
  t.done();
  return m;
}

RolloutSection read_rollout(ConfigTable t) {
  RolloutSection r;
  r.prompts_per_step = t.integer("prompts_per_step", 16, {1, 1e6});
  r.gen.max_new_tokens = t.integer("max_new_tokens", 16, {1, 1e6});
  r.gen.sampling.temperature = t.number("temperature", 1.0, {1e-3, 100});
  r.gen.sampling.top_p = t.number("top_p", 1.0, {1e-6, 1});
  r.gen.sampling.top_k = t.integer("top_k", 0, {0, 1e9});
  r.num_workers = t.integer("num_workers", 2, {1, 4096});
  r.dynamic_sampling = t.boolean("dynamic_sampling", false);
  r.max_sampling_rounds = t.integer("max_sampling_rounds", 4, {1, 64});
  r.ep_size = t.integer("ep_size", 1, {1, 4096});
  r.gen.batch_rows = t.integer("batch_rows", 0, {0, 1e6});
  r.gen.streaming = t.boolean("streaming", false);
  r.gen.prefill_tokens = t.integer("prefill_tokens", model::GenerateConfig{}.prefill_tokens, {0, 1e9});
  r.gen.stop = t.strings("stop", {});
  for (const std::string& s : r.gen.stop) {
    if (s.empty()) throw Error("config: rollout.stop holds an empty string", "an empty stop string would end every answer at once; remove it");
  }
  t.done();
  return r;
}

TrainSection read_train(ConfigTable t, int64_t max_new_tokens, bool async) {
  TrainSection s;
  const int64_t default_checkpoint_every = async ? TrainSection::kAsyncCheckpointEvery : 0;
  s.steps = t.integer("steps", 100, {0, 1e9});
  s.sft_steps = t.integer("sft_steps", 0, {0, 1e9});
  s.sft_batch_size = t.integer("sft_batch_size", 64, {1, 1e6});
  s.sft_lr = t.number("sft_lr", 3e-3, {0, 10});
  s.eval_prompts = t.integer("eval_prompts", 200, {1, 1e7});
  s.eval_every = t.integer("eval_every", 0, {0, 1e9});
  s.checkpoint_every = t.integer("checkpoint_every", default_checkpoint_every, {0, 1e9});
  if (async && s.checkpoint_every == 0) {
    MOERL_LOG(WARN) << "config: train.checkpoint_every = 0 in async mode: the experience stream is trimmed only "
                       "behind committed checkpoints, so the queue service keeps every record of the run (set an "
                       "interval, e.g. the async default " << TrainSection::kAsyncCheckpointEvery << ")";
  }
  s.keep_checkpoints = t.integer("keep_checkpoints", 2, {1, 1e6});
  s.seed = static_cast<uint64_t>(t.integer("seed", 0, {0, kBig}));
  s.threads = t.integer("threads", 0, {0, 1024});
  train::TrainerConfig& c = s.trainer;
  c.adamw.lr = t.number("lr", 1e-3, {0, 10});
  c.adamw.beta1 = t.number("beta1", 0.9, {0, 0.999999});
  c.adamw.beta2 = t.number("beta2", 0.999, {0, 0.999999});
  c.adamw.weight_decay = t.number("weight_decay", 0.0, {0, 10});
  c.max_grad_norm = t.number("max_grad_norm", 1.0, {0, 1e9});
  c.micro_batch_size = t.integer("micro_batch_size", 64, {1, 1e7});
  c.ppo_epochs = t.integer("ppo_epochs", 1, {1, 1000});
  c.ppo_mini_batch_size = t.integer("ppo_mini_batch_size", 0, {0, 1e7});
  // Score tokens from the hidden states, this many response positions at a time, never
  // making [B,T,V] logits (train/chunked_logprobs.h); 0 = the model's full logits.
  c.logprob_chunk = t.integer("logprob_chunk", 0, {0, 1e9});
  // Recompute each decoder layer in the backward instead of keeping its activations
  // (model/checkpointed_layer.h).
  c.activation_checkpointing = t.boolean("activation_checkpointing", false) ? model::LayerCheckpointing::kPerLayer
                                                                            : model::LayerCheckpointing::kNone;
  // Micro-batches by padded tokens (rows x longest row) instead of micro_batch_size rows
  // (train/micro_batches.h); 0 = off.
  c.max_tokens_per_micro_batch = t.integer("max_tokens_per_micro_batch", 0, {0, 1e12});
  c.max_nonfinite_steps = t.integer("max_nonfinite_steps", 5, {1, 1e6});
  c.schedule.lr = c.adamw.lr;
  c.schedule.warmup_steps = t.integer("warmup_steps", 0, {0, 1e9});
  c.schedule.total_steps = std::max<int64_t>(1, s.steps);
  c.schedule.min_lr_ratio = t.number("min_lr_ratio", 0.1, {0, 1});
  c.schedule.kind = t.choice("lr_schedule", "cosine", {"cosine", "constant"}) == "cosine"
                        ? train::LrSchedule::Kind::kCosine
                        : train::LrSchedule::Kind::kConstant;
  c.max_new_tokens = max_new_tokens;
  t.done();
  return s;
}

}  // namespace

TrainSection read_train_section(ConfigTable t, int64_t max_new_tokens, bool async) {
  return read_train(std::move(t), max_new_tokens, async);
}

model::ModelOptions ModelSection::options(bool rollout) const {
  model::ModelOptions o;
  o.dtype = (rollout ? rollout_dtype : dtype) == DType::kBFloat16 ? at::kBFloat16 : at::kFloat;
  o.device = open_device(device, "config: model.device");
  return o;
}

JobConfig JobConfig::load(const std::string& path, const std::vector<std::string>& overrides) {
  return parse(ConfigDoc::load(path, overrides));
}

JobConfig JobConfig::parse(ConfigDoc doc) {
  JobConfig j;
  ConfigTable root = doc.root();
  j.model = read_model(root.table("model"));
  j.rollout = read_rollout(root.table("rollout"));
  j.runtime = runtime::RuntimeConfig::from_config(root.table("runtime"));
  j.train = read_train(root.table("train"), j.rollout.gen.max_new_tokens, j.runtime.mode == runtime::RunMode::kAsync);
  ConfigTable algo = root.table("algorithm");
  const bool correction_given = algo.has("behaviour_correction");
  j.loss = rl::read_loss_config(algo);
  algo.done();
  if (j.runtime.mode == runtime::RunMode::kAsync) {
    // Async samples come from older policy versions: correct for it unless told not to.
    if (!correction_given) {
      j.loss.behaviour_correction = rl::BehaviourCorrection::kTis;
      j.loss.validate();
    } else if (j.loss.behaviour_correction == rl::BehaviourCorrection::kNone) {
      MOERL_LOG(WARN) << "config: algorithm.behaviour_correction = \"none\" in async mode: samples from older "
                            "policy versions are trained on as if fresh (no off-policy correction); the default "
                            "for async is \"tis\"";
    }
  }
  j.train.trainer.loss = j.loss;
  j.train.trainer.sampling = j.rollout.gen.sampling;
  j.rollout.gen.record_routing = j.loss.routing_replay == rl::RoutingReplay::kRollout;
  train::register_model_reward();
  ConfigTable task = root.table("task");
  j.chat = read_chat_section(task);
  j.task = tasks::make_task(task);
  j.reward = tasks::make_reward_fn(task, j.task);
  task.done();
  ConfigTable store = root.table("store");
  j.store_uri = store.string("uri", "");
  store.done();
  ConfigTable ep = root.table("ep");
  j.ep_size = ep.integer("size", 1, {1, 4096});
  j.ep_backend = ep.choice("backend", "loopback", {"loopback", "fabric", "alltoall", "cuda_ipc", "nccl", "hierarchical"});
  for (const char* hop : {"intra_backend", "inter_backend"}) {
    if (ep.has(hop) && j.ep_backend != "hierarchical") {
      throw Error("config: ep." + std::string(hop) + " is set but ep.backend = \"" + j.ep_backend + "\"",
                  "the hop backends belong to backend = \"hierarchical\"; remove the key or switch the backend");
    }
  }
  const std::string intra = ep.choice("intra_backend", "auto", {"auto", "fabric", "alltoall", "cuda_ipc", "nccl"});
  j.ep_intra_backend = intra == "auto" ? "" : intra;
  j.ep_inter_backend = ep.choice("inter_backend", "fabric", {"fabric", "alltoall", "cuda_ipc", "nccl"});
  j.ep_timeout_seconds = ep.number("timeout_seconds", 300, {1, 86400});
  ep.done();
  j.metrics = read_metrics_section(root.table("metrics"));
  root.done();
  for (const auto& [key, size] : {std::pair<const char*, int64_t>{"ep.size", j.ep_size}, {"rollout.ep_size", j.rollout.ep_size}}) {
    if (j.model.arch.num_experts % size != 0) {
      throw Error("config: " + std::string(key) + "=" + std::to_string(size) + " must divide model.num_experts=" +
                      std::to_string(j.model.arch.num_experts),
                  "choose a size that divides the expert count");
    }
  }
  const int64_t lockstep_ranks = j.runtime.mode == runtime::RunMode::kAsync ? j.rollout.ep_size : j.ep_size;
  if (j.rollout.gen.batch_rows > 0 && lockstep_ranks > 1) {
    throw Error("config: rollout.batch_rows=" + std::to_string(j.rollout.gen.batch_rows) +
                    " (continuous batching) with rollout ranks in expert-parallel lockstep (" +
                    (j.runtime.mode == runtime::RunMode::kAsync ? "rollout.ep_size=" : "ep.size=") +
                    std::to_string(lockstep_ranks) + ")",
                "set rollout.batch_rows = 0: an EP rollout group decodes its whole batch at once");
  }
  if (j.rollout.gen.streaming &&
      (j.runtime.mode != runtime::RunMode::kAsync || j.rollout.ep_size > 1 || j.rollout.gen.batch_rows == 0)) {
    throw Error("config: rollout.streaming = true needs runtime.mode = \"async\", rollout.ep_size = 1 and "
                    "rollout.batch_rows > 0 (it has mode " + std::string(j.runtime.mode == runtime::RunMode::kAsync ? "async" : "sync") +
                    ", ep_size " + std::to_string(j.rollout.ep_size) + ", batch_rows " +
                    std::to_string(j.rollout.gen.batch_rows) + ")",
                "streaming keeps batch_rows rows of one async worker decoding; the sync job and EP rollout "
                "instances generate each batch whole: set rollout.streaming = false there");
  }
  if (j.rollout.ep_size > 1 && j.runtime.mode != runtime::RunMode::kAsync) {
    throw Error("config: rollout.ep_size=" + std::to_string(j.rollout.ep_size) +
                    " sizes the rollout instances of the async job, but runtime.mode = \"sync\"",
                "the sync job generates on the trainer's ranks (ep.size); set rollout.ep_size = 1, or "
                "runtime.mode = \"async\"");
  }
  if (j.loss.group_size < 1) throw Error("config: algorithm.group_size must be >= 1", "use e.g. 8");
  if (j.rollout.dynamic_sampling) {
    if (j.loss.uses_critic() || j.loss.group_size < 2) {
      throw Error("config: rollout.dynamic_sampling = true needs a group advantage estimator and group_size >= 2 "
                      "(have adv_estimator = \"" + std::string(rl::name_of(j.loss.adv_estimator)) +
                      "\", group_size = " + std::to_string(j.loss.group_size) + ")",
                  "it drops groups whose rewards are all equal, which only have advantage 0 under grpo, "
                  "drgrpo or rloo; set dynamic_sampling = false for gae");
    }
    if (j.ep_size > 1 && j.runtime.mode == runtime::RunMode::kSync) {
      throw Error("config: rollout.dynamic_sampling = true with ep.size = " + std::to_string(j.ep_size) +
                      " in runtime.mode = \"sync\" is not supported",
                  "the sync job's EP ranks would have to agree on every extra sampling round; use ep.size = 1, "
                  "or runtime.mode = \"async\" (its controller filters groups before the trainer group sees them)");
    }
  }
  j.effective_toml = runtime::without_queue_password(doc.to_toml(), j.runtime);
  return j;
}

}  // namespace moerl::job
