// Generation on the GPU with the decode step as one CUDA graph. Prefill runs through
// Model::forward (KV cache on the GPU); each later token runs a static-shape decode step
// (embedding, attention over the whole cache under its validity mask, grouped-GEMM experts,
// head) that is captured once and replayed; sampling (Gumbel-max at the temperature) and the
// stop bookkeeping stay on the GPU, and tokens reach the host once per window of 8 steps.
// Then ended rows are refilled with waiting prompts (GenerateConfig::batch_rows: continuous
// batching) and the loop stops once every row has ended.
//
//   model::cuda::install_cuda_experts();
//   auto out = model::cuda::fast_generate(model, prompts, gen_config);  // as model::generate
//
// Handles greedy and temperature sampling (top_k = 0, top_p = 1) for bf16 CUDA models without
// sliding-window attention, every architecture (GQA or MLA attention, whose decode step runs
// in the absorbed order over the latent cache; routed + shared experts; biased sigmoid group
// routing); anything else runs model::generate. Same Generation results
// (tokens, logprobs at temperature 1, sampling logprobs, finish reason); the random stream
// differs from generate()'s CPU sampler, so sampled tokens differ for one seed.
// Not thread-safe for one Model. Errors: as model::generate (empty prompts, bad ids).
#pragma once

#include <cstdint>
#include <vector>

#include "model/generate.h"
#include "model/model.h"

namespace moerl::model::cuda {

struct FastGenerateStats {
  bool used_graph = false;  // false: graph capture failed or was off; steps ran eagerly
  bool fell_back = false;   // settings outside the fast path: model::generate ran
  int64_t steps = 0;        // tokens sampled per row slot (decode steps, in windows of 8)
};

// Whether fast_generate runs the graph path for this model and these settings.
bool fast_generate_accepts(const Model& m, const GenerateConfig& config);
// Makes model::generate() use fast_generate whenever it accepts (rollout, evaluation).
void install_fast_generate();

std::vector<Generation> fast_generate(Model& m, const std::vector<std::vector<int64_t>>& prompts,
                                      const GenerateConfig& config, bool use_graph = true,
                                      FastGenerateStats* stats = nullptr);

// Decode-graph captures that failed in this process (each call then decoded eagerly, and
// logged why): benchmarks report it so an eager run is not taken for the graph's speed.
int64_t graph_capture_failures();

}  // namespace moerl::model::cuda
