// prefill_prompts(): dedupe, left-pad, forward in row chunks under the token budget, copy rows out.
#include "model/prefill.h"

#include <algorithm>
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
                        int64_t new_tokens, bool share, int64_t max_tokens, RoutingRecorder* recorder) {
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
  KvCache& filled = shared ? small : p.cache;
  // Rows per forward: all of them, or as many as the token budget holds (one rank only: under
  // EP every rank must make the same forwards, and their row counts differ).
  int64_t chunk = U;
  if (max_tokens > 0 && model.ep_group().world_size() == 1) chunk = std::clamp<int64_t>(max_tokens / Tp, 1, U);
  std::vector<at::Tensor> logits;
  std::vector<std::vector<uint16_t>> routed(U);
  for (int64_t u0 = 0; u0 < U; u0 += chunk) {
    const int64_t n = std::min(chunk, U - u0);
    KvCache part = filled.row_view(u0, n);  // all rows when one forward takes them
    ForwardOutput out = model.forward(
        {ids.narrow(0, u0, n).to(dev), mask.narrow(0, u0, n).to(dev), {}, &part, {}, /*last_logits_only=*/true});
    logits.push_back(out.logits_BTV.select(1, 0));
    if (recorder != nullptr && !out.routing.empty()) {
      RoutingRecorder mine(n);
      mine.add(out.routing, Tp, std::vector<int64_t>(first.begin() + u0, first.begin() + u0 + n));
      for (int64_t i = 0; i < n; ++i) routed[u0 + i] = mine.take(i);
    }
  }
  filled.length = Tp;  // the row views moved their own cursors
  const at::Tensor logits_UV = logits.size() == 1 ? logits[0] : at::cat(logits, 0);
  if (recorder != nullptr) {
    for (int64_t b = 0; b < B; ++b) recorder->append(b, routed[row_of[b]]);
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

at::Tensor Admitted::logits_at_rows(int64_t n) const {
  if (logits_BV.size(0) == n) return logits_BV;  // every row, in order (a fresh table admits them so)
  at::Tensor all = at::zeros({n, logits_BV.size(1)}, logits_BV.options());
  return all.index_copy(0, at::tensor(rows, at::kLong).to(logits_BV.device()), logits_BV);
}

int64_t prompt_room(const std::vector<std::vector<int64_t>>& prompts, const GenerateConfig& config) {
  int64_t room = std::max<int64_t>(0, config.prompt_room);
  for (const auto& p : prompts) room = std::max(room, static_cast<int64_t>(p.size()));
  return room;
}

Admitted admit_waiting(Model& model, KvCache& cache, SlotTable& table,
                       const std::vector<std::vector<int64_t>>& prompts, const GenerateConfig& config,
                       RoutingRecorder* recorder) {
  Admitted a;
  a.rows = table.admit();
  if (a.rows.empty()) return a;
  std::vector<std::vector<int64_t>> mine;
  size_t longest_all = 0, longest_mine = 0;
  longest_all = static_cast<size_t>(prompt_room(prompts, config));
  for (int64_t r : a.rows) {
    mine.push_back(prompts[table.sequence(r)]);
    longest_mine = std::max(longest_mine, mine.back().size());
  }
  const bool first = !cache.valid.defined();
  const int64_t k = static_cast<int64_t>(a.rows.size());
  RoutingRecorder theirs(k);
  const bool whole = first && k == table.rows();  // this prefill's cache becomes the batch's
  const int64_t new_tokens = whole ? static_cast<int64_t>(longest_all - longest_mine) + config.max_new_tokens : 0;
  Prefill p = prefill_prompts(model, mine, config.pad_id, new_tokens, config.share_prefill, config.prefill_tokens,
                              recorder != nullptr ? &theirs : nullptr);
  if (whole) {
    cache = std::move(p.cache);  // rows 0..k-1: a fresh table admits them in order
    cache.use_row_cursors();
  } else if (first) {
    // Fewer prompts than rows (a stream's first call): every row's cache made, these moved in.
    cache = model.make_cache(table.rows(), static_cast<int64_t>(longest_all) + config.max_new_tokens);
    cache.use_row_cursors();
    cache.put_rows(p.cache, a.rows);
  } else {
    cache.put_rows(p.cache, a.rows);
  }
  if (recorder != nullptr) {
    for (int64_t i = 0; i < k; ++i) recorder->append(a.rows[i], theirs.take(i));
  }
  a.logits_BV = p.logits_BV;
  a.prompt_slots = p.prompt_slots;
  return a;
}

}  // namespace moerl::model
