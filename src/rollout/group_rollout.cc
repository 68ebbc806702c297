#include "rollout/group_rollout.h"

#include <algorithm>
#include <chrono>

#include "base/check.h"
#include "base/deadline.h"
#include "model/generate.h"
#include "model/stop_strings.h"

namespace moerl::rollout {

namespace {

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

runtime::TaskUnit make_task_unit(const tasks::TaskItem& item, const model::Tokenizer& tok,
                                 uint32_t group_size, uint64_t cursor) {
  runtime::TaskUnit u;
  u.task_id = item.id;
  u.group_size = group_size;
  for (int64_t id : tok.encode(item.prompt, /*add_bos=*/true)) u.prompt_ids.push_back(static_cast<int32_t>(id));
  u.prompt_text = item.prompt;
  u.reference = item.answer;
  u.created_unix_ms = unix_ms();
  u.cursor = cursor;
  return u;
}

std::string completion_text(const model::Tokenizer& tok, const std::vector<int64_t>& tokens) {
  const std::vector<int64_t> stops = tok.stop_ids();
  std::vector<int64_t> body;
  for (int64_t t : tokens) {
    if (std::find(stops.begin(), stops.end(), t) != stops.end()) break;
    body.push_back(t);
  }
  return tok.decode(body);
}

GroupRollout::GroupRollout(model::Model& policy, const model::Tokenizer& tokenizer,
                           tasks::RewardFn& reward, RolloutConfig cfg, std::string worker_id)
    : policy_(policy), tokenizer_(tokenizer), reward_(reward), cfg_(cfg), worker_id_(std::move(worker_id)) {
  cfg_.sampling.validate();
}

std::vector<int64_t> GroupRollout::prompt_of(const runtime::TaskUnit& u) const {
  std::vector<int64_t> ids(u.prompt_ids.begin(), u.prompt_ids.end());
  if (ids.empty()) ids = tokenizer_.encode(u.prompt_text, /*add_bos=*/true);
  return ids;
}

model::GenerateConfig GroupRollout::generate_config(uint64_t seed, uint64_t version, std::function<bool()> cancel) const {
  model::GenerateConfig gc;
  gc.max_new_tokens = cfg_.max_new_tokens;
  gc.sampling = cfg_.sampling;
  gc.seed = seed;
  gc.eos_ids = tokenizer_.stop_ids();
  gc.pad_id = tokenizer_.pad_id();
  gc.all_done = cfg_.all_done;
  gc.record_routing = cfg_.record_routing;
  gc.batch_rows = cfg_.batch_rows;
  gc.prefill_tokens = cfg_.prefill_tokens;
  gc.cancel = std::move(cancel);
  gc.weights_tag = version;
  gc.stop = stops_.hook();
  return gc;
}

std::vector<double> GroupRollout::score(std::span<const runtime::TaskUnit> units,
                                        std::span<const model::Generation> gens) {
  std::vector<tasks::TaskItem> items;
  std::vector<std::string> completions;
  size_t row = 0;
  for (const runtime::TaskUnit& u : units) {
    for (uint32_t g = 0; g < u.group_size; ++g, ++row) {
      items.push_back({u.task_id, u.prompt_text, u.reference});
      completions.push_back(completion_text(tokenizer_, gens[row].tokens));
    }
  }
  // NOTE: a rank of an instance with no units of a batch still generated (a placeholder row,
  // for the lockstep) but has nothing to score.
  std::vector<double> rewards = items.empty() ? std::vector<double>() : reward_.score(items, completions);
  MOERL_CHECK_EQ(rewards.size(), items.size());
  return rewards;
}

runtime::ExperienceRecord GroupRollout::record(const runtime::TaskUnit& u, const std::vector<int64_t>& prompt,
                                               std::span<model::Generation> gens, const double* rewards,
                                               double gen_s, double reward_s) const {
  runtime::ExperienceRecord r;
  r.task_id = u.task_id;
  r.attempt = u.attempt;
  r.worker_id = worker_id_;
  r.cursor = u.cursor;
  r.generate_seconds = gen_s;
  r.reward_seconds = reward_s;
  for (uint32_t g = 0; g < u.group_size; ++g) {
    model::Generation& gen = gens[g];
    runtime::Sample s;
    s.prompt_tokens.assign(prompt.begin(), prompt.end());
    s.response_tokens.assign(gen.tokens.begin(), gen.tokens.end());
    // The distribution actually sampled (temperature, top-k/top-p): what the trainer
    // recomputes (model::sampling_logits); greedy rows have none, so their T = 1 logprob.
    s.behaviour_logprobs = cfg_.sampling.greedy ? gen.logprobs : gen.sample_logprobs;
    s.reward = static_cast<float>(rewards[g]);
    if (cfg_.record_routing) {
      s.routed_experts = std::move(gen.routed_experts);
      s.routing_layers = static_cast<uint16_t>(policy_.num_moe_layers());
      s.routing_top_k = static_cast<uint16_t>(policy_.arch().router_config(policy_.config()).top_k);
    }
    for (const model::Generation::WeightSpan& w : gen.weight_spans) {
      s.version_spans.push_back({static_cast<uint32_t>(w.start), w.tag});
    }
    s.finish_reason = gen.finish == model::FinishReason::kLength ? runtime::FinishReason::kLength
                                                                  : runtime::FinishReason::kStop;
    s.generate_seconds = gen_s / u.group_size;
    r.samples.push_back(std::move(s));
  }
  r.finished_unix_ms = unix_ms();
  return r;
}

std::vector<runtime::ExperienceRecord> GroupRollout::run(const std::vector<runtime::TaskUnit>& units,
                                                         uint64_t seed, uint64_t version,
                                                         std::function<bool()> cancel) {
  const int64_t leased = unix_ms();
  std::vector<std::vector<int64_t>> unit_prompts, prompts;
  for (const auto& u : units) {
    unit_prompts.push_back(prompt_of(u));
    for (uint32_t g = 0; g < u.group_size; ++g) prompts.push_back(unit_prompts.back());
  }
  const double t0 = now_seconds();
  std::vector<model::Generation> gens = model::generate(policy_, prompts, generate_config(seed, version, std::move(cancel)));
  const double gen_s = now_seconds() - t0;
  const double t1 = now_seconds();
  const std::vector<double> rewards = score(units, gens);
  const double reward_s = now_seconds() - t1;
  std::vector<runtime::ExperienceRecord> out;
  size_t row = 0;
  const double share = 1.0 / static_cast<double>(std::max<size_t>(1, gens.size()));
  for (size_t i = 0; i < units.size(); ++i) {
    const runtime::TaskUnit& u = units[i];
    out.push_back(record(u, unit_prompts[i], std::span(gens).subspan(row, u.group_size), rewards.data() + row,
                         gen_s * u.group_size * share, reward_s * u.group_size * share));
    out.back().leased_unix_ms = leased;
    row += u.group_size;
  }
  return out;
}

}  // namespace moerl::rollout
