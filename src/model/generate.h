// Batched generation with a KV cache: ragged prompts are left-padded into one batch,
// prefilled together, then decoded one token per step for every unfinished row; a row stops
// at one of `eos_ids` (the EOS token is kept in its output) or after max_new_tokens. With
// batch_rows, a fixed number of rows decode and finished rows take waiting prompts.
//
//   GenerateConfig g;  g.max_new_tokens = 32;  g.sampling.temperature = 1.0;  g.seed = 7;
//   g.eos_ids = {tok.eos_id()};  g.pad_id = tok.pad_id();
//   std::vector<Generation> out = generate(model, {{1, 40, 41}, {1, 50}}, g);
//   out[0].tokens, out[0].logprobs, out[0].finish == FinishReason::kEos
//
// Runs under inference mode (no autograd graph). Not thread-safe for one Model.
// Deterministic for a fixed seed, batch and model. Errors: empty prompts, ids out of range.
// Under lockstep (all_done set) a rank with no prompts takes part on a placeholder row.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/model.h"
#include "model/sampler.h"

namespace moerl::model {

// kStop: a stop string ended the row (GenerateConfig::stop).
enum class FinishReason { kEos, kLength, kStop };
const char* finish_reason_name(FinishReason r);  // "eos" | "length" | "stop"

class GenerateStream;

struct GenerateConfig {
  int64_t max_new_tokens = 16;
  SamplingConfig sampling;
  uint64_t seed = 0;
  std::vector<int64_t> eos_ids;  // empty: stop only on length
  int64_t pad_id = 0;            // fills left padding (masked out, never attended)
  // Expert-parallel lockstep: dispatch/combine are collective, so every rank must make the
  // same number of forward calls. Given whether all of this rank's rows are finished, returns
  // whether every rank's are (called once per decode step on every rank). Null: this rank
  // alone decides. Ranks may hold different numbers of rows (none: a placeholder row).
  std::function<bool(bool)> all_done;
  // Routing replay (R3): record, per row, the experts every fed token was routed to in every
  // MoE layer (Generation::routed_experts).
  bool record_routing = false;
  // Asked once per decode step; true abandons the call: generate() throws GenerationCancelled
  // (nothing partial is returned). A drain uses it so a long batch cannot outlive a Spot
  // notice. Under `all_done` lockstep it must answer alike on every rank. Null: never.
  std::function<bool()> cancel;
  // Asked with a running row's new tokens after each token it appends (host side); true ends
  // the row there with FinishReason::kStop (model/stop_strings.h builds it from stop strings).
  // Must depend only on the tokens. The CUDA-graph path asks as each window of decode steps
  // reaches the host (model/cuda/fast_generate), keeping each row's tokens up to the first
  // true and freeing its row there, so both paths return the same rows. Null: never.
  std::function<bool(const std::vector<int64_t>&)> stop;
  // Identical prompts (a GRPO group's samples) share one prefill (model/prefill.h). Off:
  // every row is prefilled, the reference for tests and `moerl bench gen --group`.
  bool share_prefill = true;
  // Padded prompt tokens one prefill forward takes at most (model/prefill.h; 0: no bound). It
  // bounds the prefill's activations: at Qwen3-30B-A3B's shape, 65,536 tokens (128 prompts of
  // 512) in one forward need several GB beside the weights and cache.
  int64_t prefill_tokens = 16384;
  // Rows decoded at once. 0: every prompt at once (static batching). Fewer rows than prompts:
  // continuous batching: a row whose sequence ends takes the next waiting prompt (in input
  // order) at once, instead of idling until the batch's longest row ends. Each row's cache
  // holds the longest prompt plus max_new_tokens. Not under `all_done` lockstep.
  int64_t batch_rows = 0;
  // Per-prompt caps on new tokens, each in [1, max_new_tokens] (empty: max_new_tokens for all).
  std::vector<int64_t> max_new_tokens_per_prompt;
  // Streaming (GenerateStream): more prompts are fed as rows free up and each sequence is
  // handed over as it ends, so the rows stay full across what would be separate calls. Needs
  // batch_rows > 0; not with max_new_tokens_per_prompt or all_done. Null: the prompts given.
  GenerateStream* stream = nullptr;
  uint64_t weights_tag = 0;  // the weights' tag at the start (Generation::weight_spans)
  // Prompt tokens every row's cache has room for (0: the longest prompt given). A stream's
  // prompts must fit it (GenerateStream::feed is told the room).
  int64_t prompt_room = 0;
};

// Thrown by generate() when GenerateConfig::cancel asked it to stop.
class GenerationCancelled : public Error {
 public:
  explicit GenerationCancelled(int64_t steps)
      : Error("generation cancelled after " + std::to_string(steps) + " decode steps", "", ErrorCode::kTimeout),
        steps_(steps) {}
  int64_t steps() const { return steps_; }

 private:
  int64_t steps_;
};

struct Generation {
  std::vector<int64_t> tokens;         // new tokens (EOS included when it stopped the row)
  std::vector<float> logprobs;         // model logprob at temperature 1 (Sample::logprob_B)
  std::vector<float> sample_logprobs;  // under the sampling distribution (Sample::sample_logprob_B)
  FinishReason finish = FinishReason::kLength;
  // record_routing: [(prompt + tokens - 1) x MoE layers x top-k] expert ids, token-major (the
  // prompt, then each generated token but the last: those fed back through the model).
  std::vector<uint16_t> routed_experts;
  // Which weights produced which tokens: (first token, GenerateConfig::weights_tag or the tag
  // a stream gave), starts increasing from 0. One span unless a stream changed the weights
  // while the sequence ran.
  struct WeightSpan {
    int64_t start = 0;
    uint64_t tag = 0;
    bool operator==(const WeightSpan&) const = default;
  };
  std::vector<WeightSpan> weight_spans;
};

// What a stream gives generate() between decode steps.
struct StreamFeed {
  std::vector<std::vector<int64_t>> prompts;  // decoded after every prompt given before
  // Set when the stream changed the model's weights in place (Model::load_weights) during
  // this feed(): their tag. The running sequences' next tokens come from the new weights.
  std::optional<uint64_t> weights_tag;
};

// The source and sink of a streaming generate() call (GenerateConfig::stream). Called on the
// generating thread, between decode steps (between windows of steps on the CUDA-graph path):
// first finished() for each sequence that ended, then feed(). A call given no prompts returns
// at once; otherwise generate() returns once no
// sequence runs or waits and feed() gave no prompt; it returns the sequences not handed to
// finished() (none, unless it threw) and empty Generations in the others' places.
class GenerateStream {
 public:
  virtual ~GenerateStream() = default;
  // `free_rows`: rows that no running or waiting sequence will take. Prompts must be at most
  // `prompt_room` tokens (keep longer ones for a later call with more room).
  virtual StreamFeed feed(int64_t free_rows, int64_t prompt_room) = 0;
  // Sequence `index` (its position among the prompts given, then fed) ended.
  virtual void finished(int64_t index, Generation g) = 0;
};

std::vector<Generation> generate(Model& model, const std::vector<std::vector<int64_t>>& prompts,
                                 const GenerateConfig& config);

// A device fast path (model/cuda installs the CUDA-graph one): generate() hands a call to
// `run` when `accepts` says the model and settings are within it, so callers (rollout,
// evaluation) stay device-agnostic. Install once at startup, before any generate().
struct GenerateFastPath {
  bool (*accepts)(const Model& model, const GenerateConfig& config) = nullptr;
  std::vector<Generation> (*run)(Model& model, const std::vector<std::vector<int64_t>>& prompts,
                                 const GenerateConfig& config) = nullptr;
};
void set_generate_fast_path(GenerateFastPath path);

}  // namespace moerl::model
