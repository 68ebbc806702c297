// prefill_prompts(): dedupe, left-pad, one forward, copy rows out.
#include "model/prefill.h"

#include <map>

#include "base/error.h"

namespace moerl::model {

void check_prompts(const std::vector<std::vector<int64_t>>& prompts) {
  for (size_t b = 0; b < prompts.size(); ++b) {
    if (prompts[b].empty()) {
      throw Error("prompt " + std::to_string(b) + " is empty", "start every prompt with at least one token (e.g. BOS)");
    }
  }
}

Prefill prefill_prompts(Model& model, const std::vector<std::vector<int64_t>>& prompts, int64_t pad_id,
                        int64_t new_tokens, bool share, RoutingRecorder* recorder) {
  check_prompts(prompts);
  const int64_t B = static_cast<int64_t>(prompts.size());
  std::vector<int64_t> row_of(B);         // row b -> its row in the forwarded batch
  std::vector<const std::vector<int64_t>*> unique;
  std::map<std::vector<int64_t>, int64_t> seen;
  int64_t Tp = 0;
  for (int64_t b = 0; b < B; ++b) {
    Tp = std::max<int64_t>(Tp, static_cast<int64_t>(prompts[b].size()));
    if (share) {
      auto [it, added] = seen.emplace(prompts[b], static_cast<int64_t>(unique.size()));
      if (!added) {
        row_of[b] = it->second;
        continue;
      }
    }
    row_of[b] = static_cast<int64_t>(unique.size());
    unique.push_back(&prompts[b]);
  }
  const int64_t U = static_cast<int64_t>(unique.size());
  at::Tensor ids = at::full({U, Tp}, pad_id, at::kLong), mask = at::zeros({U, Tp}, at::kLong);
  std::vector<int64_t> first(U);  // row u's prompt starts after its left padding
  for (int64_t u = 0; u < U; ++u) {
    const int64_t n = static_cast<int64_t>(unique[u]->size());
    first[u] = Tp - n;
    std::copy(unique[u]->begin(), unique[u]->end(), ids[u].data_ptr<int64_t>() + first[u]);
    mask[u].narrow(0, first[u], n).fill_(1);
  }
  const auto dev = model.device();
  Prefill p;
  p.prompt_slots = Tp;
  p.unique_rows = U;
  const bool shared = U < B;
  // A shared prefill fills a cache of the unique rows, sized to the prompts alone.
  KvCache small = shared ? model.make_cache(U, Tp) : KvCache();
  p.cache = model.make_cache(B, Tp + new_tokens);
  ForwardOutput out =
      model.forward({ids.to(dev), mask.to(dev), {}, shared ? &small : &p.cache, {}, /*last_logits_only=*/true});
  at::Tensor logits_UV = out.logits_BTV.select(1, 0);
  if (recorder != nullptr && !out.routing.empty()) {
    RoutingRecorder per_unique(U);
    per_unique.add(out.routing, Tp, first);
    std::vector<std::vector<uint16_t>> rows(U);
    for (int64_t u = 0; u < U; ++u) rows[u] = per_unique.take(u);
    for (int64_t b = 0; b < B; ++b) recorder->append(b, rows[row_of[b]]);
  }
  if (!shared) {
    p.logits_BV = logits_UV;
    return p;
  }
  at::Tensor rows = at::tensor(row_of, at::kLong).to(dev);
  p.cache.copy_rows(small, rows);
  p.logits_BV = logits_UV.index_select(0, rows);
  return p;
}

Admitted admit_rows(Model& model, KvCache& cache, const std::vector<int64_t>& rows,
                    const std::vector<std::vector<int64_t>>& prompts, int64_t pad_id, bool share,
                    RoutingRecorder* recorder) {
  const int64_t k = static_cast<int64_t>(rows.size());
  RoutingRecorder mine(k);
  Prefill p = prefill_prompts(model, prompts, pad_id, /*new_tokens=*/0, share, recorder ? &mine : nullptr);
  cache.put_rows(p.cache, rows);
  if (recorder != nullptr) {
    for (int64_t i = 0; i < k; ++i) recorder->append(rows[i], mine.take(i));
  }
  return {p.logits_BV, p.prompt_slots};
}

}  // namespace moerl::model
