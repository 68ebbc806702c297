// Routing replay (R3), the rollout side: collects, during generate(), the experts each row's
// tokens were routed to in every MoE layer, so the trainer can force the same selection
// (model::ForwardInput::routing_replay). Layout per row: token-major [tokens fed x L x K]
// (the prompt, then every generated token that was fed back; the last sampled token never is).
//
//   RoutingRecorder rec(B);
//   rec.add(out.routing, rows_and_slots);  // after each forward of generate()
//   std::vector<uint16_t> ids = rec.take(b);
// Not thread-safe. Host copies: one device->host copy of the stacked top-k ids per forward.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "model/model.h"

namespace moerl::model {

class RoutingRecorder {
 public:
  explicit RoutingRecorder(int64_t batch) : rows_(batch) {}

  // One forward over a [B, T] batch (T = prompt slots at prefill, 1 per decode step):
  // appends, for each row b, the ids of its tokens in slots [first[b], T) (first[b] = T
  // records nothing: a padded or finished row).
  void add(const std::vector<LayerRouting>& routing, int64_t T, const std::vector<int64_t>& first);
  // Appends ids recorded elsewhere (a shared prefill's prompt row) to row `row`.
  void append(int64_t row, const std::vector<uint16_t>& ids) { rows_[row].insert(rows_[row].end(), ids.begin(), ids.end()); }
  std::vector<uint16_t> take(int64_t row) { return std::exchange(rows_[row], {}); }

 private:
  std::vector<std::vector<uint16_t>> rows_;
};

}  // namespace moerl::model
