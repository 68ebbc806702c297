// generate(): prefill (model/prefill.h: left-padded, identical prompts once), then decode step
// by step; per-row stop bookkeeping on the host (model/slot_table.h, one small device->host
// copy per step); under continuous batching, rows freed by a step are refilled after it.
#include "model/generate.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>

#include "base/error.h"
#include "model/decode_meter.h"
#include "model/prefill.h"
#include "model/routing_record.h"
#include "model/slot_table.h"

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
    placeholder.max_new_tokens_per_prompt.clear();
    generate(model, {{config.pad_id}}, placeholder);
    return out;
  }
  const int64_t R = decode_rows(B, config);
  const bool continuous = R < B || config.stream != nullptr;
  if (continuous && config.all_done) {
    throw Error("batch_rows=" + std::to_string(config.batch_rows) + " (continuous batching) under expert-parallel lockstep",
                "set batch_rows = 0 for an EP group: refills would need every rank's agreement");
  }
  check_prompts(prompts);
  c10::InferenceMode guard;
  const auto dev = model.device();
  Sampler sampler(config.sampling, config.seed);
  SlotTable table(B, R, config);
  RoutingRecorder recorder(R);
  RoutingRecorder* rec = config.record_routing ? &recorder : nullptr;
  KvCache cache;
  std::vector<std::vector<int64_t>> all = prompts;  // and those a stream feeds
  const int64_t room = prompt_room(prompts, config);
  at::Tensor logits_BV = admit_waiting(model, cache, table, all, config, rec).logits_at_rows(R);  // the first R
  std::vector<int64_t> first(R);
  at::Tensor step_mask = at::ones({R, 1}, at::kLong);
  DecodeMeter meter(R);
  for (int64_t step = 0;; ++step) {
    if (config.cancel && config.cancel()) throw GenerationCancelled(step);
    meter.enter(DecodePhase::kDecode);
    Sample s = sampler.sample(logits_BV);
    at::Tensor tok = s.tokens_B.cpu(), lp = s.logprob_B.cpu(), slp = s.sample_logprob_B.cpu();
    for (int64_t r = 0; r < R; ++r) {
      if (!table.busy(r)) continue;
      const int64_t ended = table.push(r, tok.data_ptr<int64_t>()[r], lp.data_ptr<float>()[r], slp.data_ptr<float>()[r]);
      if (ended >= 0 && rec) table.output(ended).routed_experts = recorder.take(r);
    }
    stream_exchange(table, all, config, room, &meter);  // weights it changes serve the forward below
    meter.enter(DecodePhase::kDecode);
    if (!continuous && step + 1 == config.max_new_tokens) break;
    const bool local_done = table.running() == 0 && !table.waiting();
    if (config.all_done ? config.all_done(local_done) : local_done) break;
    if (table.running() > 0 || config.all_done) {
      // Free rows step with a masked pad token (the batch shape stays fixed).
      at::Tensor next = tok.clone();
      for (int64_t r = 0; r < R; ++r) {
        const bool fed = table.busy(r);
        if (!fed) next.data_ptr<int64_t>()[r] = config.pad_id;
        step_mask.data_ptr<int64_t>()[r] = fed ? 1 : 0;
        first[r] = fed ? 0 : 1;
      }
      ForwardOutput o = model.forward({next.unsqueeze(1).to(dev), step_mask, {}, &cache});  // host mask: see Model::forward
      if (rec) recorder.add(o.routing, 1, first);
      logits_BV = o.logits_BTV.select(1, 0);
    }
    meter.enter(DecodePhase::kAdmit);
    const Admitted refill = admit_waiting(model, cache, table, all, config, rec);
    if (!refill.rows.empty()) {
      logits_BV = logits_BV.index_copy(0, at::tensor(refill.rows, at::kLong).to(dev), refill.logits_BV);
    }
    meter.count(step + 1, table.tokens());
  }
  return table.take();  // every row ended by its cap at the latest
}

}  // namespace moerl::model
