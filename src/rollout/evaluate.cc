#include "rollout/evaluate.h"

#include <algorithm>

#include "base/deadline.h"
#include "model/generate.h"
#include "model/stop_strings.h"
#include "rollout/group_rollout.h"

namespace moerl::rollout {

EvalResult evaluate(model::Model& policy, const model::Tokenizer& tok, const tasks::Task& task,
                    tasks::RewardFn& reward, const EvalConfig& cfg) {
  double t0 = now_seconds();
  EvalResult res;
  std::vector<tasks::TaskItem> items;
  std::vector<tasks::TaskItem> all = task.items(tasks::Split::kHeldOut, 0, cfg.num_prompts);
  for (size_t i = static_cast<size_t>(cfg.shard); i < all.size(); i += static_cast<size_t>(cfg.num_shards)) {
    items.push_back(all[i]);
  }
  double sum = 0;
  int64_t exact = 0;
  const model::StopStrings stops(tok, cfg.stop);
  for (size_t begin = 0; begin < items.size(); begin += cfg.batch_size) {
    size_t end = std::min(items.size(), begin + static_cast<size_t>(cfg.batch_size));
    std::vector<std::vector<int64_t>> prompts;
    std::vector<tasks::TaskItem> batch(items.begin() + begin, items.begin() + end);
    for (const auto& it : batch) prompts.push_back(tok.encode(it.prompt, /*add_bos=*/true));
    model::GenerateConfig gc;
    gc.max_new_tokens = cfg.max_new_tokens;
    gc.sampling.greedy = true;
    gc.eos_ids = tok.stop_ids();
    gc.pad_id = tok.pad_id();
    gc.all_done = cfg.all_done;
    gc.stop = stops.hook();
    std::vector<model::Generation> gens = model::generate(policy, prompts, gc);
    std::vector<std::string> completions;
    for (const auto& g : gens) completions.push_back(completion_text(tok, g.tokens));
    for (double r : reward.score(batch, completions)) {
      sum += r;
      exact += r >= 1.0 ? 1 : 0;
    }
  }
  res.num_prompts = static_cast<int64_t>(items.size());
  res.mean_reward = items.empty() ? 0 : sum / items.size();
  res.exact_fraction = items.empty() ? 0 : static_cast<double>(exact) / items.size();
  res.seconds = now_seconds() - t0;
  return res;
}

}  // namespace moerl::rollout
