// `moerl bench gen`: generation speed of a model geometry (a Hugging Face config.json, random
// weights drawn on the device) against the memory roofline of its decode step; one JSON
// object on stdout.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/deadline.h"
#include "base/error.h"
#include "base/subprocess.h"
#include "cli/bench.h"
#include "cli/bench_models.h"
#include "cli/profile.h"
#include "io/hf_config.h"
#include "job/gpu_paths.h"
#include "model/generate.h"
#include "model/model.h"

namespace moerl::cli {
namespace {

int64_t tensor_bytes(const at::Tensor& t) { return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0; }

std::vector<int64_t> int_list(const std::string& text, const char* flag) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1) {
      throw Error(std::string(flag) + " " + text + ": '" + item + "' is not a positive integer",
                  "give a comma-separated list, e.g. 64,128,256", ErrorCode::kInvalidInput);
    }
    out.push_back(v);
  }
  return out;
}

// How long the baseline may run: transformers' generate at 48 layers and batch 256 takes
// minutes, not hours.
constexpr double kBaselineSeconds = 3600;

// Runs the baseline command (before this process takes GPU memory) with the run's geometry
// appended and parses the JSON object it prints last; what it printed before goes to stderr.
nlohmann::json run_baseline(const std::string& cmd, const std::string& config, int64_t layers,
                            const std::string& batches, int64_t prompt, int64_t new_tokens) {
  const std::string full = cmd + " --config '" + config + "' --layers " + std::to_string(layers) + " --batch " +
                           batches + " --prompt " + std::to_string(prompt) + " --new-tokens " + std::to_string(new_tokens);
  std::fprintf(stderr, "bench gen: baseline: %s\n", full.c_str());
  const CapturedRun run = run_captured({"/bin/sh", "-c", full}, Deadline::after_seconds(kBaselineSeconds));
  const size_t brace = run.output.rfind("\n{");
  const std::string last = brace == std::string::npos ? run.output : run.output.substr(brace + 1);
  std::fprintf(stderr, "%s", run.output.substr(0, run.output.size() - last.size()).c_str());
  nlohmann::json out = nlohmann::json::parse(last, nullptr, false);
  if (run.timed_out) {
    throw Error("bench gen: --baseline '" + cmd + "' still ran after " + std::to_string(static_cast<int>(kBaselineSeconds)) + " s",
                "give the baseline fewer batches or tokens", ErrorCode::kTimeout);
  }
  if (run.status != 0 || out.is_discarded() || !out.contains("rows")) {
    throw Error("bench gen: --baseline '" + cmd + "' exited with status " + std::to_string(run.status) +
                    " and printed no JSON object with \"rows\"",
                "run the command by hand (e.g. python3 dev/gpu/hf_generate.py --config C.json --batch 64 --prompt 64)",
                ErrorCode::kInvalidInput);
  }
  return out;
}

int run_bench_gen(Args& a) {
  if (a.flag("--help") || a.flag("-h")) {
    std::printf(
        "usage: moerl bench gen --config CONFIG.json [--layers N] [--batch 64,128,256] [--prompt 64]\n"
        "                       [--new-tokens 64] [--device cpu|cuda] [--seed 7] [--group G]\n"
        "                       [--profile TRACE.json] [--baseline 'python3 dev/gpu/hf_generate.py']\n"
        "                       [--compare-kernels]\n"
        "Decode speed of the geometry CONFIG.json describes (a Hugging Face config.json; --layers keeps the\n"
        "first N layers), random weights drawn on the device (bf16 on cuda, float32 on cpu), temperature 1.\n"
        "Per batch: decode ms per step ((time of 8 + new-tokens tokens - time of 8) / new-tokens), new\n"
        "tokens/s, the bytes one decode step reads (every weight but the embedding table, the experts the\n"
        "batch touches under uniform routing, the KV cache's slots filled, on average over the timed steps)\n"
        "and their rate as a fraction of the device copy rate measured in the same run. --group G: batch/G\n"
        "prompts, each G times (a GRPO batch); each row then also times prefilling every sample and prints\n"
        "the rollout tokens/s ratio of the shared prefill to it. --profile runs the last batch's longer run\n"
        "once more under PyTorch's profiler, writes its Chrome trace to TRACE.json and adds the GPU kernels\n"
        "that took the most time to the JSON. --baseline CMD first runs CMD with --config, --layers,\n"
        "--batch, --prompt and --new-tokens appended (dev/gpu/hf_generate.py: transformers' generate on the\n"
        "same device) and adds its tokens/s and our speed-up to each row. --compare-kernels (cuda) also\n"
        "times each batch with the decode step's own kernels off (at:: ops: _grouped_mm experts,\n"
        "batched-product attention, at:: sampling), with the expert kernels alone, with the attention\n"
        "kernel too and with all of them (+ the sampling kernel; model/cuda/decode_kernels.h), and prints\n"
        "each one's speed-up over the at:: ops.\n"
        "Presets: examples/bench/*.json.\n");
    return 0;
  }
  const std::string path = a.required("--config");
  io::HfConfig c = io::HfConfig::load(path);
  const int64_t layers = a.integer("--layers", c.num_hidden_layers);
  const int64_t P = a.integer("--prompt", 64), N = a.integer("--new-tokens", 64), warm = 8;
  const std::string dev = a.value("--device").value_or("cpu");
  const uint64_t seed = static_cast<uint64_t>(a.integer("--seed", 7));
  const int64_t G = a.integer("--group", 1);
  const std::optional<std::string> profile = a.value("--profile");
  const std::optional<std::string> baseline_cmd = a.value("--baseline");
  const std::string batch_list = a.value("--batch").value_or("64,128,256");
  const bool compare_kernels = a.flag("--compare-kernels");
  a.finish();
  const std::vector<int64_t> batches = int_list(batch_list, "--batch");
  for (int64_t B : batches) {
    if (G < 1 || B % G != 0) {
      throw Error("bench gen: --group " + std::to_string(G) + " does not divide --batch " + std::to_string(B),
                  "give a group size that divides every batch", ErrorCode::kInvalidInput);
    }
  }
  if (layers < 1 || layers > c.num_hidden_layers || P < 1 || N < 1) {
    throw Error("bench gen: --layers " + std::to_string(layers) + " --prompt " + std::to_string(P) + " --new-tokens " +
                    std::to_string(N) + " out of range",
                "need 1 <= layers <= num_hidden_layers (" + std::to_string(c.num_hidden_layers) +
                    "), a positive prompt and token count",
                ErrorCode::kInvalidInput);
  }
  c.num_hidden_layers = layers;
  c.max_position_embeddings = std::max(c.max_position_embeddings, P + warm + N);
  const at::Device device = job::open_device(dev, "bench gen: --device");
  if (compare_kernels && !(device.is_cuda() && job::restore_decode_kernels())) {
    throw Error("bench gen: --compare-kernels needs --device cuda (a CUDA build)",
                "drop the flag on the cpu", ErrorCode::kInvalidInput);
  }
  const nlohmann::json baseline =
      baseline_cmd ? run_baseline(*baseline_cmd, path, layers, batch_list, P, N) : nlohmann::json();
  const at::ScalarType dtype = device.is_cuda() ? at::kBFloat16 : at::kFloat;
  const double rate = copy_rate(device, device.is_cuda() ? int64_t{1} << 31 : int64_t{1} << 27);
  model::Model m = random_model(c, device, dtype, seed);
  double weight_bytes = 0, expert_bytes = 0;
  for (const auto& [name, t] : m.params()) {
    if (name == "model.embed_tokens.weight" && m.params().count("lm_head.weight")) continue;  // B rows of it
    (name.find(".experts.") != std::string::npos ? expert_bytes : weight_bytes) += static_cast<double>(tensor_bytes(t));
  }
  nlohmann::json rows = nlohmann::json::array(), kernels;
  for (int64_t B : batches) {
    const int64_t failures_before = job::decode_graph_failures();
    at::Tensor ids = at::randint(3, std::min<int64_t>(c.vocab_size, 100000), {B / G, P}, at::kLong);
    std::vector<std::vector<int64_t>> prompts(B);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t* row = ids[b / G].data_ptr<int64_t>();
      prompts[b].assign(row, row + P);
    }
    model::GenerateConfig g;
    g.sampling.temperature = 1.0;
    g.seed = seed;
    auto timed = [&](int64_t n, bool share = true) {
      g.max_new_tokens = n;
      g.share_prefill = share;
      auto t0 = std::chrono::steady_clock::now();
      model::generate(m, prompts, g);  // returns host tokens: the device is done
      return seconds_since(t0);
    };
    // Seconds per decode step; the runs of warm and warm + N tokens into *short_s, *long_s.
    auto step_time = [&](double* short_s, double* long_s) {
      timed(warm);  // warm-up: weight stacks, CUDA graphs, the allocator
      *short_s = timed(warm);
      *long_s = timed(warm + N);
      return std::max(1e-9, (*long_s - *short_s) / static_cast<double>(N));
    };
    double t_short = 0, t_long = 0;
    const double step_s = step_time(&t_short, &t_long);
    const double E = static_cast<double>(c.num_experts), K = static_cast<double>(c.num_experts_per_tok);
    const double touched = E > 0 ? 1 - std::pow(1 - K / E, static_cast<double>(B)) : 1;
    double kv_bytes = 0;
    // The cache's bytes, from one on the meta device: a real one would hold GPU memory beside
    // the --compare-kernels runs (14.7 GB at 48 layers and batch 128).
    const model::KvCache cache(layers, B, P + warm + N, m.arch().kv_cache_shape(m.config()),
                               at::TensorOptions().dtype(dtype).device(at::kMeta));
    for (const auto* group : {&cache.k, &cache.v, &cache.latent}) {
      for (const at::Tensor& t : *group) kv_bytes += static_cast<double>(tensor_bytes(t));
    }
    // A step must read the slots filled so far, not the whole cache: over the timed steps
    // (warm .. warm + N - 1) a row holds P + warm + (N + 1) / 2 slots on average.
    kv_bytes *= (static_cast<double>(P + warm) + (N + 1) / 2.0) / static_cast<double>(P + warm + N);
    const double step_bytes = weight_bytes + touched * expert_bytes + kv_bytes;
    rows.push_back({{"batch", B},
                    {"decode_ms_per_step", 1e3 * step_s},
                    {"new_tokens_per_s", static_cast<double>(B) / step_s},
                    {"GB_read_per_step", step_bytes / 1e9},
                    {"roofline_fraction", step_bytes / step_s / rate},
                    {"prefill_and_8_tokens_s", t_short}});
    if (compare_kernels) {  // each setting of the decode step's own kernels, then the default again
      struct Setting {
        const char* name;
        bool experts, attention, sampling;
      };
      const Setting settings[] = {{"aten_ops", false, false, false},
                                  {"expert_kernels", true, false, false},
                                  {"expert_attention_kernels", true, true, false},
                                  {"all_kernels", true, true, true}};
      double ts = 0, tl = 0, aten_s = 0;
      for (const Setting& k : settings) {
        job::set_decode_kernels(k.experts, k.attention, k.sampling);
        const double sec = step_time(&ts, &tl);
        if (!k.experts) aten_s = sec;
        rows.back()[std::string(k.name) + "_decode_ms_per_step"] = 1e3 * sec;
        rows.back()[std::string(k.name) + "_roofline_fraction"] = step_bytes / sec / rate;
        if (k.experts) rows.back()[std::string(k.name) + "_speedup"] = aten_s / sec;
      }
      job::restore_decode_kernels();
    }
    if (G > 1) {  // the same batch with every sample prefilled, for the ratio
      const double each_short = timed(warm, false), each_long = timed(warm + N, false);
      const double tokens = static_cast<double>(B * (warm + N));
      rows.back()["group"] = G;
      rows.back()["prefill_and_8_tokens_s_each"] = each_short;
      rows.back()["rollout_tokens_per_s"] = tokens / t_long;
      rows.back()["rollout_tokens_per_s_each"] = tokens / each_long;
      rows.back()["shared_prefill_speedup"] = each_long / t_long;
    }
    if (baseline_cmd) {
      for (const auto& r : baseline["rows"]) {
        if (r.value("batch", int64_t{0}) != B) continue;
        if (r.contains("error")) {
          rows.back()["baseline_error"] = r["error"];
        } else {
          rows.back()["baseline_new_tokens_per_s"] = r.value("new_tokens_per_s", 0.0);
          rows.back()["speedup_vs_baseline"] = r.value("decode_ms_per_step", 0.0) / (1e3 * step_s);
        }
      }
    }
    // Calls of this row that decoded eagerly because the graph capture failed (logged): their
    // times are not the graph path's.
    rows.back()["eager_fallbacks"] = job::decode_graph_failures() - failures_before;
    if (profile && B == batches.back()) kernels = profile_region(*profile, [&] { timed(warm + N); });
  }
  nlohmann::json out = {{"config", path},
                        {"model_type", c.model_type},
                        {"layers", layers},
                        {"device", dev},
                        {"dtype", dtype == at::kBFloat16 ? "bfloat16" : "float32"},
                        {"prompt", P},
                        {"new_tokens", N},
                        {"copy_GBps", rate / 1e9},
                        {"weights_GB", (weight_bytes + expert_bytes) / 1e9},
                        {"rows", rows}};
  if (profile) out["profile"] = kernels;
  if (baseline_cmd) out["baseline"] = baseline.value("baseline", *baseline_cmd);
  std::printf("%s\n", out.dump(1).c_str());
  return 0;
}

}  // namespace

MOERL_BENCH("gen", "decode tokens/s of a config.json geometry (random weights) vs the memory roofline", run_bench_gen);

}  // namespace moerl::cli
