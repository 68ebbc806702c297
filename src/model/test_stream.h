// A scripted GenerateStream for the streaming tests (CPU and CUDA-graph paths): feeds its
// prompts `chunk` at a time whenever rows are free, optionally loads other weights into the
// model at its first feed (tag 2), and keeps what finished() hands over, in ending order; and
// the checks both paths' weight-swap tests share.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "model/generate.h"
#include "model/model.h"
#include "model/test_util.h"

namespace moerl::model::testing {

class ScriptedStream final : public GenerateStream {
 public:
  ScriptedStream(std::vector<std::vector<int64_t>> later, int64_t chunk) : later_(std::move(later)), chunk_(chunk) {}
  void swap_at_first_feed(Model* m, Params weights) {
    model_ = m;
    swap_to_ = std::move(weights);
  }

  StreamFeed feed(int64_t free_rows, int64_t prompt_room) override {
    StreamFeed f;
    rooms.push_back(prompt_room);
    if (++feeds == 1 && model_ != nullptr) {
      model_->load_weights(swap_to_);
      f.weights_tag = 2;
    }
    while (free_rows > 0 && next_ < later_.size() && static_cast<int64_t>(f.prompts.size()) < chunk_) {
      f.prompts.push_back(later_[next_++]);
      --free_rows;
    }
    return f;
  }
  void finished(int64_t index, Generation g) override {
    EXPECT_EQ(done.count(index), 0u) << "sequence " << index << " handed over twice";
    order.push_back(index);
    done[index] = std::move(g);
  }
  // What finished() got, in sequence order.
  std::vector<Generation> in_order() const {
    std::vector<Generation> out;
    for (const auto& [i, g] : done) out.push_back(g);
    return out;
  }

  std::map<int64_t, Generation> done;
  std::vector<int64_t> order;
  std::vector<int64_t> rooms;
  int feeds = 0;

 private:
  std::vector<std::vector<int64_t>> later_;
  int64_t chunk_;
  size_t next_ = 0;
  Model* model_ = nullptr;
  Params swap_to_;
};

inline std::vector<std::vector<int64_t>> slice(const std::vector<std::vector<int64_t>>& v, size_t from, size_t to) {
  return {v.begin() + static_cast<std::ptrdiff_t>(from), v.begin() + static_cast<std::ptrdiff_t>(to)};
}

// `g` as a stream call on 2 rows whose stream feeds ragged prompts 2..4 and swaps the model's
// weights to `weights` at its first feed (tag 1 before, 2 after).
inline GenerateConfig swap_call(const GenerateConfig& g, ScriptedStream& s) {
  GenerateConfig c = g;
  c.batch_rows = 2;
  c.stream = &s;
  c.weights_tag = 1;
  c.prompt_room = 8;
  return c;
}

// After a swap_call run: sequences 0 and 1 were running at the swap, so their tokens before it
// are the old weights' answer (`under_a`) and the rest are tagged 2; sequences 2..4 started
// after it and are the new weights' answer (`under_b`). Returns where 0 and 1 swapped.
inline std::vector<int64_t> expect_swapped(const ScriptedStream& s, const std::vector<Generation>& under_a,
                                           const std::vector<Generation>& under_b, double tol) {
  std::vector<int64_t> at;
  EXPECT_EQ(s.done.size(), 5u);
  if (s.done.size() != 5u) return at;
  for (int64_t i : {0, 1}) {
    const Generation& x = s.done.at(i);
    EXPECT_EQ(x.weight_spans.size(), 2u) << i;
    if (x.weight_spans.size() != 2u) return at;
    EXPECT_EQ(x.weight_spans[0], (Generation::WeightSpan{0, 1}));
    EXPECT_EQ(x.weight_spans[1].tag, 2u);
    const int64_t k = x.weight_spans[1].start;
    EXPECT_GT(k, 0);
    EXPECT_LT(k, static_cast<int64_t>(x.tokens.size()));
    if (k <= 0 || k > static_cast<int64_t>(under_a[i].tokens.size())) return at;
    EXPECT_EQ(std::vector<int64_t>(x.tokens.begin(), x.tokens.begin() + k),
              std::vector<int64_t>(under_a[i].tokens.begin(), under_a[i].tokens.begin() + k));
    at.push_back(k);
  }
  for (int64_t i : {2, 3, 4}) {
    EXPECT_EQ(s.done.at(i).weight_spans, (std::vector<Generation::WeightSpan>{{0, 2}})) << i;
    expect_same_generations({s.done.at(i)}, {under_b[i - 2]}, tol, "after the swap, prompt " + std::to_string(i));
  }
  return at;
}

}  // namespace moerl::model::testing
