// generate(): prefill (model/prefill.h: left-padded, identical prompts once), then decode step
// by step; per-row stop bookkeeping on the host (one small device->host copy per step).
#include "model/generate.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>

#include "base/error.h"
#include "model/prefill.h"
#include "model/routing_record.h"

namespace moerl::model {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kEos: return "eos";
    case FinishReason::kLength: return "length";
    case FinishReason::kStop: return "stop";
  }
  return "?";
}

namespace {
GenerateFastPath g_fast_path;
}  // namespace

void set_generate_fast_path(GenerateFastPath path) { g_fast_path = path; }

std::vector<Generation> generate(Model& model, const std::vector<std::vector<int64_t>>& prompts,
                                 const GenerateConfig& config) {
  if (g_fast_path.accepts && g_fast_path.accepts(model, config)) return g_fast_path.run(model, prompts, config);
  config.sampling.validate();
  if (config.max_new_tokens < 0) {
    throw Error("max_new_tokens=" + std::to_string(config.max_new_tokens) + " must be >= 0", "");
  }
  const int64_t B = static_cast<int64_t>(prompts.size());
  std::vector<Generation> out(B);
  if (config.max_new_tokens == 0) return out;
  if (B == 0) {
    if (!config.all_done) return out;
    // Lockstep (EP): dispatch/combine are collective, so a rank with no prompts still makes
    // every forward call the others make, on one placeholder row whose output is dropped.
    GenerateConfig placeholder = config;
    placeholder.record_routing = false;
    placeholder.stop = nullptr;
    generate(model, {{config.pad_id}}, placeholder);
    return out;
  }
  c10::InferenceMode guard;
  const auto dev = model.device();
  Sampler sampler(config.sampling, config.seed);
  RoutingRecorder recorder(B);
  Prefill prefill = prefill_prompts(model, prompts, config.pad_id, config.max_new_tokens, config.share_prefill,
                                    config.record_routing ? &recorder : nullptr);
  KvCache& cache = prefill.cache;
  at::Tensor logits_BV = prefill.logits_BV;
  std::vector<int64_t> first(B);

  std::vector<bool> done(B, false);
  int64_t num_done = 0;
  at::Tensor step_mask = at::ones({B, 1}, at::kLong);
  for (int64_t step = 0; step < config.max_new_tokens; ++step) {
    if (config.cancel && config.cancel()) throw GenerationCancelled(step);
    Sample s = sampler.sample(logits_BV);
    at::Tensor tok = s.tokens_B.cpu(), lp = s.logprob_B.cpu(), slp = s.sample_logprob_B.cpu();
    const int64_t* t = tok.data_ptr<int64_t>();
    const float* l = lp.data_ptr<float>();
    const float* sl = slp.data_ptr<float>();
    for (int64_t b = 0; b < B; ++b) {
      if (done[b]) continue;
      out[b].tokens.push_back(t[b]);
      out[b].logprobs.push_back(l[b]);
      out[b].sample_logprobs.push_back(sl[b]);
      if (std::find(config.eos_ids.begin(), config.eos_ids.end(), t[b]) != config.eos_ids.end()) {
        out[b].finish = FinishReason::kEos;
        done[b] = true;
        ++num_done;
      } else if (config.stop && config.stop(out[b].tokens)) {
        out[b].finish = FinishReason::kStop;
        done[b] = true;
        ++num_done;
      }
    }
    if (step + 1 == config.max_new_tokens) break;
    const bool finished = config.all_done ? config.all_done(num_done == B) : num_done == B;
    if (finished) break;
    // Finished rows keep stepping with a masked pad token (batch shape stays fixed).
    at::Tensor next = tok.clone();
    for (int64_t b = 0; b < B; ++b) {
      if (done[b]) {
        next.data_ptr<int64_t>()[b] = config.pad_id;
        step_mask.data_ptr<int64_t>()[b] = 0;
      }
    }
    ForwardOutput o = model.forward({next.unsqueeze(1).to(dev), step_mask.to(dev), {}, &cache});
    if (config.record_routing) {
      for (int64_t b = 0; b < B; ++b) first[b] = done[b] ? 1 : 0;  // a finished row was fed a pad
      recorder.add(o.routing, 1, first);
    }
    logits_BV = o.logits_BTV.select(1, 0);
  }
  if (config.record_routing) {
    for (int64_t b = 0; b < B; ++b) out[b].routed_experts = recorder.take(b);
  }
  return out;
}

}  // namespace moerl::model
