// A scripted GenerateStream for the streaming tests (CPU and CUDA-graph paths): feeds its
// prompts `chunk` at a time whenever rows are free, optionally loads other weights into the
// model at its first feed (tag 2), and keeps what finished() hands over, in ending order.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "model/generate.h"
#include "model/model.h"

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

}  // namespace moerl::model::testing
