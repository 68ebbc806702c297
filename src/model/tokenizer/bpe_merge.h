// The BPE merge loop: a word's symbols (token ids) are merged pair by pair, always the pair
// of lowest merge rank, the leftmost one on ties, until no adjacent pair has a merge. This
// is what tokenizers' Word::merge_all computes (it pops a heap of (rank, position); stale
// entries are never applied, since a merged symbol always covers more text).
//
//   MergeTable merges;
//   merges.insert(id_a, id_b, /*rank=*/0, /*new_id=*/id_ab);
//   std::vector<int32_t> word = {id_a, id_b, id_c};
//   merge_word(word, merges);               // {id_ab, id_c} unless (ab, c) merges too
//
// Short words use a linear scan over the pairs (fast for the few symbols of a pre-token);
// long ones (a SentencePiece-style segment can be a whole document) a binary heap with a
// linked list, O(n log n). MergeTable is immutable once built: lookups are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace moerl::model::hf {

struct MergeRule {
  uint32_t rank = 0;
  int32_t new_id = -1;
};

// Open-addressing hash map (a, b) -> MergeRule.
class MergeTable {
 public:
  // A pair inserted twice keeps the later rule (tokenizers collects merges into a map).
  void insert(int32_t a, int32_t b, uint32_t rank, int32_t new_id);
  const MergeRule* find(int32_t a, int32_t b) const {
    if (slots_.empty()) return nullptr;
    const uint64_t key = pack(a, b);
    for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.rule;
      if (s.key == kEmpty) return nullptr;
    }
  }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  struct Slot {
    uint64_t key = kEmpty;
    MergeRule rule;
  };
  static uint64_t pack(int32_t a, int32_t b) { return (uint64_t{static_cast<uint32_t>(a)} << 32) | static_cast<uint32_t>(b); }
  size_t slot_of(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  void grow();

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

// Merges `symbols` in place (see the file comment).
void merge_word(std::vector<int32_t>& symbols, const MergeTable& merges);

// The same result by the textbook loop (scan every pair, merge the best, repeat): O(n^2),
// kept as the reference the tests and the benchmark compare the fast loop against.
void merge_word_naive(std::vector<int32_t>& symbols, const MergeTable& merges);

}  // namespace moerl::model::hf
