// `moerl bench train`: the time of one GRPO training step (train::PolicyTrainer) of a model
// geometry (a Hugging Face config.json, random weights drawn on the device) on a synthetic
// batch, and its model FLOPs utilisation against the device's matmul rate measured in the same
// run; one JSON object on stdout. It does not generate: the batch's tokens are random.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "base/config.h"
#include "base/error.h"
#include "cli/bench.h"
#include "cli/bench_models.h"
#include "cli/profile.h"
#include "io/hf_config.h"
#include "job/gpu_paths.h"
#include "job/job_config.h"
#include "model/model.h"
#include "train/policy_trainer.h"

namespace moerl::cli {
namespace {

constexpr int64_t kGroupSize = 16;  // GRPO responses per prompt

Error bad_flag(const std::string& what, const std::string& hint) {
  return Error("bench train: " + what, hint, ErrorCode::kInvalidInput);
}

// The [train] keys of --set train.KEY=VALUE, read by the job config's own [train] reader, so
// every key `moerl train` accepts applies here; an unknown key fails naming it. Of the keys
// outside TrainerConfig only train.threads acts (intra-op threads).
job::TrainSection train_section(const std::vector<std::string>& sets, int64_t response) {
  for (const std::string& kv : sets) {
    if (kv.rfind("train.", 0) != 0 || kv.find('=') == std::string::npos) {
      throw bad_flag("--set " + kv + " is not of the form train.KEY=VALUE",
                     "only [train] keys of the job config apply, e.g. --set train.logprob_chunk=1024");
    }
  }
  try {
    ConfigDoc doc = ConfigDoc::parse("", "bench train --set", sets);
    ConfigTable root = doc.root();
    job::TrainSection c = job::read_train_section(root.table("train"), response, /*async=*/false);
    root.done();
    return c;
  } catch (const Error& e) {
    throw Error("bench train --set: " + e.message(), e.hint(), ErrorCode::kInvalidInput);
  }
}

// Parameters one token's forward multiplies with: every weight but the embedding table (a row
// lookup; counted once as lm_head when tied), routed experts at their top-k share.
double active_parameters(const model::Model& m) {
  const io::HfConfig& c = m.config();
  const double expert_share = c.num_experts > 0 ? static_cast<double>(c.num_experts_per_tok) / c.num_experts : 1.0;
  double n = 0;
  for (const auto& [name, t] : m.params()) {
    if (name == "model.embed_tokens.weight" && !c.tie_word_embeddings) continue;
    n += static_cast<double>(t.numel()) * (name.find(".experts.") != std::string::npos ? expert_share : 1.0);
  }
  return n;
}

// Groups of kGroupSize samples of random prompt and response ids, 0/1 rewards. The behaviour
// logprobs only feed the mismatch metrics (no behaviour correction by default); pi_old is the
// policy's own, computed by the trainer (ratio 1 in the single-update step).
std::vector<runtime::ExperienceRecord> synthetic_batch(int64_t sequences, int64_t prompt, int64_t response,
                                                       int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab - 1));
  std::bernoulli_distribution reward(0.5);
  std::vector<runtime::ExperienceRecord> records(static_cast<size_t>(sequences / kGroupSize));
  for (size_t g = 0; g < records.size(); ++g) {
    runtime::ExperienceRecord& r = records[g];
    r.task_id = "bench-" + std::to_string(g);
    std::vector<int32_t> prompt_ids(static_cast<size_t>(prompt));
    for (int32_t& t : prompt_ids) t = token(rng);
    r.samples.resize(kGroupSize);
    for (runtime::Sample& s : r.samples) {
      s.prompt_tokens = prompt_ids;
      s.response_tokens.resize(static_cast<size_t>(response));
      for (int32_t& t : s.response_tokens) t = token(rng);
      s.behaviour_logprobs.assign(static_cast<size_t>(response), -std::log(static_cast<float>(vocab)));
      s.reward = reward(rng) ? 1.0f : 0.0f;
      s.version_spans = {{0, 0}};
    }
  }
  return records;
}

// Waits for the device: a read of one parameter element follows every queued kernel.
void sync_device(const model::Model& m) { (void)m.params().begin()->second.reshape({-1})[0].item<float>(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int run_bench_train(Args& a) {
  if (a.flag("--help") || a.flag("-h")) {
    std::printf(
        "usage: moerl bench train --config CONFIG.json [--layers N] [--sequences 256] [--prompt 128]\n"
        "                         [--response 1024] [--device cpu|cuda] [--seed 7] [--steps 2]\n"
        "                         [--set train.KEY=VALUE ...] [--profile TRACE.json]\n"
        "Time of one GRPO training step (forward, backward, AdamW) of the geometry CONFIG.json describes (a\n"
        "Hugging Face config.json; --layers keeps the first N layers), random weights drawn on the device\n"
        "(bf16 parameters with float32 master weights and moments on cuda, float32 on cpu), on a synthetic\n"
        "batch: groups of %lld samples of random prompt and response ids, random 0/1 rewards. The first\n"
        "step warms up; the median of the rest is reported with tokens/s, model FLOPs (6 x active\n"
        "parameters x every position forwarded) and MFU against a square matmul timed in the same run.\n"
        "--set applies any [train] key of the job config (e.g. train.logprob_chunk=1024,\n"
        "train.micro_batch_size=16). --profile runs one more step under PyTorch's profiler, writes its Chrome\n"
        "trace to TRACE.json and adds the GPU kernels that took the most time to the JSON. Presets:\n"
        "examples/bench/*.json.\n",
        static_cast<long long>(kGroupSize));
    return 0;
  }
  const std::string path = a.required("--config");
  io::HfConfig c = io::HfConfig::load(path);
  const int64_t layers = a.integer("--layers", c.num_hidden_layers);
  const int64_t S = a.integer("--sequences", 256), P = a.integer("--prompt", 128), R = a.integer("--response", 1024);
  const std::string dev = a.value("--device").value_or("cpu");
  const uint64_t seed = static_cast<uint64_t>(a.integer("--seed", 7));
  const int64_t steps = a.integer("--steps", 2);
  const std::vector<std::string> sets = a.values("--set");
  const std::optional<std::string> profile = a.value("--profile");
  a.finish();
  if (layers < 1 || layers > c.num_hidden_layers) {
    throw bad_flag("--layers " + std::to_string(layers) + " out of range",
                   "need 1 <= layers <= num_hidden_layers (" + std::to_string(c.num_hidden_layers) + ")");
  }
  if (S < kGroupSize || S % kGroupSize != 0) {
    throw bad_flag("--sequences " + std::to_string(S) + " is not a positive multiple of the GRPO group size " +
                       std::to_string(kGroupSize),
                   "use e.g. --sequences 256");
  }
  if (P < 1 || R < 1) {
    throw bad_flag("--prompt " + std::to_string(P) + " --response " + std::to_string(R) + " must be positive",
                   "use e.g. --prompt 128 --response 1024");
  }
  if (steps < 2) {
    throw bad_flag("--steps " + std::to_string(steps) + " leaves no measured step",
                   "the first step warms up; use --steps 2 or more");
  }
  const at::Device device = job::open_device(dev, "bench train: --device");
  const job::TrainSection section = train_section(sets, R);
  train::TrainerConfig tc = section.trainer;
  tc.loss.group_size = kGroupSize;
  if (section.threads > 0) at::set_num_threads(static_cast<int>(section.threads));
  c.num_hidden_layers = layers;
  c.max_position_embeddings = std::max(c.max_position_embeddings, P + R);
  const at::ScalarType dtype = device.is_cuda() ? at::kBFloat16 : at::kFloat;
  const double matmul_flops = matmul_rate(device, dtype, device.is_cuda() ? 8192 : 1024);

  model::Model m = random_model(c, device, dtype, seed);
  const double active = active_parameters(m);
  reset_peak_memory(device);
  train::PolicyTrainer trainer(m, /*reference=*/nullptr, tc, std::max<int64_t>(0, c.pad_token_id));
  const std::vector<runtime::ExperienceRecord> batch = synthetic_batch(S, P, R, c.vocab_size, seed);
  std::vector<double> seconds;
  train::StepStats last;
  for (int64_t i = 0; i < steps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    last = trainer.train_step(batch);
    sync_device(m);
    if (i > 0) seconds.push_back(seconds_since(t0));
  }
  const double step_s = median(seconds);
  const int64_t peak = peak_memory_bytes(device);
  nlohmann::json kernels;
  if (profile) {
    kernels = profile_region(*profile, [&] {
      trainer.train_step(batch);
      sync_device(m);
    });
  }

  const double tokens = static_cast<double>(S * (P + R)), response_tokens = static_cast<double>(S * R);
  // The single-update step forwards once with gradients (pi_old is that pass's logprobs); more
  // updates per step (epochs, mini-batches) add one gradient pass each and a pi_old forward.
  const int64_t mini = tc.ppo_mini_batch_size > 0 ? std::min(S, tc.ppo_mini_batch_size) : S;
  const double updates = static_cast<double>(tc.ppo_epochs * ((S + mini - 1) / mini));
  const double passes = 6.0 * static_cast<double>(tc.ppo_epochs) + (updates > 1 ? 2.0 : 0.0);
  const double flops = passes * active * tokens;
  nlohmann::json set_json = nlohmann::json::object();
  for (const std::string& kv : sets) set_json[kv.substr(6, kv.find('=') - 6)] = kv.substr(kv.find('=') + 1);
  nlohmann::json out = {
      {"config", path},
      {"model_type", c.model_type},
      {"geometry",
       {{"hidden_size", c.hidden_size}, {"num_experts", c.num_experts}, {"num_experts_per_tok", c.num_experts_per_tok},
        {"moe_intermediate_size", c.moe_intermediate_size}, {"vocab_size", c.vocab_size}}},
      {"layers", layers},
      {"device", dev},
      {"dtype", dtype == at::kBFloat16 ? "bfloat16" : "float32"},
      {"precision", device.is_cuda()
                        ? "bf16 parameters, activations and gradients; float32 AdamW master weights and moments "
                          "(train/adamw.h)"
                        : "float32 parameters, gradients and AdamW moments"},
      {"sequences", S},
      {"group_size", kGroupSize},
      {"prompt", P},
      {"response", R},
      {"tokens_per_step", tokens},
      {"response_tokens_per_step", response_tokens},
      {"steps_measured", seconds.size()},
      {"step_seconds", step_s},
      {"step_seconds_each", seconds},
      {"tokens_per_s", tokens / step_s},
      {"response_tokens_per_s", response_tokens / step_s},
      {"total_parameters", static_cast<double>(m.num_parameters())},
      {"active_parameters", active},
      {"flops_per_step", flops},
      {"flops_formula", std::to_string(static_cast<int>(passes)) +
                            " x active_parameters x tokens_per_step (every position forwarded; attention "
                            "scores and recomputation not counted)"},
      {"matmul_tflops", matmul_flops / 1e12},
      {"mfu", flops / step_s / matmul_flops},
      {"peak_memory_GB", static_cast<double>(peak) / 1e9},
      {"peak_memory_kind", peak_memory_kind(device)},
      {"optimizer_steps", last.optimizer_steps},
      {"loss", last.loss},
      {"train_set", set_json},
      {"trainer",
       {{"micro_batch_size", tc.micro_batch_size}, {"logprob_chunk", tc.logprob_chunk},
        {"ppo_epochs", tc.ppo_epochs}, {"ppo_mini_batch_size", tc.ppo_mini_batch_size}, {"lr", tc.adamw.lr},
        {"max_grad_norm", tc.max_grad_norm}, {"weight_decay", tc.adamw.weight_decay}, {"threads", at::get_num_threads()}}}};
  if (profile) out["profile"] = kernels;
  std::printf("%s\n", out.dump(1).c_str());
  return 0;
}

}  // namespace

MOERL_BENCH("train", "one GRPO training step of a config.json geometry (random weights): tokens/s and MFU",
            run_bench_train);

}  // namespace moerl::cli
