// `moerl bench batching`: continuous against static batching on a skewed answer-length
// workload (most answers short, a few at the cap, as in RL rollouts), one model geometry with
// random weights; one JSON object on stdout.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "cli/bench.h"
#include "cli/bench_models.h"
#include "io/hf_config.h"
#include "job/gpu_paths.h"
#include "model/generate.h"

namespace moerl::cli {
namespace {

// Answer lengths: a `long_fraction` of them at the cap, the rest uniform in [1, 2 * short_mean - 1].
std::vector<int64_t> skewed_lengths(int64_t n, int64_t cap, int64_t short_mean, double long_fraction, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> coin(0, 1);
  std::uniform_int_distribution<int64_t> short_len(1, std::max<int64_t>(1, 2 * short_mean - 1));
  std::vector<int64_t> out(n);
  for (int64_t& len : out) len = coin(rng) < long_fraction ? cap : std::min(cap, short_len(rng));
  return out;
}

int run_bench_batching(Args& a) {
  if (a.flag("--help") || a.flag("-h")) {
    std::printf(
        "usage: moerl bench batching --config CONFIG.json [--layers N] [--rows 64] [--prompts 256] [--prompt 128]\n"
        "                            [--new-tokens 1024] [--short-mean 64] [--long-fraction 0.05]\n"
        "                            [--device cpu|cuda] [--seed 7]\n"
        "Generates --prompts answers with --rows decode rows, twice: static batching (the prompts in chunks\n"
        "of --rows, each chunk decoding until its longest answer ends) and continuous batching (a row whose\n"
        "answer ends takes the next prompt at once). Answer lengths are fixed per prompt: a --long-fraction\n"
        "of them at --new-tokens, the rest uniform with mean --short-mean. Prints new tokens/s of both, their\n"
        "ratio, and the decode steps static batching takes against the fewest possible (sum / rows).\n");
    return 0;
  }
  const std::string path = a.required("--config");
  io::HfConfig c = io::HfConfig::load(path);
  const int64_t layers = a.integer("--layers", c.num_hidden_layers);
  const int64_t R = a.integer("--rows", 64), Q = a.integer("--prompts", 256), P = a.integer("--prompt", 128);
  const int64_t N = a.integer("--new-tokens", 1024), mean = a.integer("--short-mean", 64);
  const double long_fraction = a.number("--long-fraction", 0.05);
  const std::string dev = a.value("--device").value_or("cpu");
  const uint64_t seed = static_cast<uint64_t>(a.integer("--seed", 7));
  a.finish();
  if (layers < 1 || layers > c.num_hidden_layers || R < 1 || Q < R || P < 1 || N < 1 || mean < 1 ||
      long_fraction < 0 || long_fraction > 1) {
    throw Error("bench batching: --layers " + std::to_string(layers) + " --rows " + std::to_string(R) + " --prompts " +
                    std::to_string(Q) + " --prompt " + std::to_string(P) + " --new-tokens " + std::to_string(N) +
                    " --short-mean " + std::to_string(mean) + " --long-fraction " + std::to_string(long_fraction) +
                    " out of range",
                "need 1 <= layers <= num_hidden_layers (" + std::to_string(c.num_hidden_layers) +
                    "), 1 <= rows <= prompts, positive lengths, a fraction in [0, 1]",
                ErrorCode::kInvalidInput);
  }
  c.num_hidden_layers = layers;
  c.max_position_embeddings = std::max(c.max_position_embeddings, P + N);
  const at::Device device = job::open_device(dev, "bench batching: --device");
  model::Model m = random_model(c, device, device.is_cuda() ? at::kBFloat16 : at::kFloat, seed);
  at::Tensor ids = at::randint(3, std::min<int64_t>(c.vocab_size, 100000), {Q, P}, at::kLong);
  std::vector<std::vector<int64_t>> prompts(Q);
  for (int64_t q = 0; q < Q; ++q) prompts[q].assign(ids[q].data_ptr<int64_t>(), ids[q].data_ptr<int64_t>() + P);
  const std::vector<int64_t> lengths = skewed_lengths(Q, N, mean, long_fraction, seed);

  model::GenerateConfig g;
  g.sampling.temperature = 1.0;
  g.seed = seed;
  g.max_new_tokens = N;
  auto count = [](const std::vector<model::Generation>& out) {
    int64_t n = 0;
    for (const auto& x : out) n += static_cast<int64_t>(x.tokens.size());
    return n;
  };
  int64_t total = 0, static_steps = 0;
  for (int64_t len : lengths) total += len;
  auto run_static = [&] {
    int64_t made = 0;
    for (int64_t q0 = 0; q0 < Q; q0 += R) {
      const int64_t q1 = std::min(Q, q0 + R);
      std::vector<std::vector<int64_t>> chunk(prompts.begin() + q0, prompts.begin() + q1);
      model::GenerateConfig s = g;
      s.max_new_tokens_per_prompt.assign(lengths.begin() + q0, lengths.begin() + q1);
      made += count(model::generate(m, chunk, s));
    }
    return made;
  };
  for (int64_t q0 = 0; q0 < Q; q0 += R) {
    static_steps += *std::max_element(lengths.begin() + q0, lengths.begin() + std::min(Q, q0 + R));
  }
  auto run_continuous = [&] {
    model::GenerateConfig s = g;
    s.batch_rows = R;
    s.max_new_tokens_per_prompt = lengths;
    return count(model::generate(m, prompts, s));
  };
  {  // warm-up: weight stacks, CUDA graphs, the allocator
    model::GenerateConfig w = g;
    w.max_new_tokens = 8;
    model::generate(m, std::vector<std::vector<int64_t>>(prompts.begin(), prompts.begin() + R), w);
  }
  auto timed = [&](auto&& fn) {
    auto t0 = std::chrono::steady_clock::now();
    const int64_t made = fn();
    if (made != total) {
      throw Error("bench batching: generated " + std::to_string(made) + " tokens, not the " + std::to_string(total) +
                      " the lengths ask for",
                  "a bug in the generation path: report it", ErrorCode::kInternal);
    }
    return seconds_since(t0);
  };
  const double t_static = timed(run_static), t_cont = timed(run_continuous);
  nlohmann::json out = {{"config", path},
                        {"model_type", c.model_type},
                        {"layers", layers},
                        {"device", dev},
                        {"rows", R},
                        {"prompts", Q},
                        {"prompt", P},
                        {"new_tokens_cap", N},
                        {"short_mean", mean},
                        {"long_fraction", long_fraction},
                        {"new_tokens_total", total},
                        {"static_s", t_static},
                        {"continuous_s", t_cont},
                        {"static_new_tokens_per_s", static_cast<double>(total) / t_static},
                        {"continuous_new_tokens_per_s", static_cast<double>(total) / t_cont},
                        {"continuous_speedup", t_static / t_cont},
                        {"static_decode_steps", static_steps},
                        {"fewest_decode_steps", (total + R - 1) / R}};
  std::printf("%s\n", out.dump(1).c_str());
  return 0;
}

}  // namespace

MOERL_BENCH("batching", "continuous vs static batching tokens/s on a skewed answer-length workload", run_bench_batching);

}  // namespace moerl::cli
