// The BPE merge loop: hand-worked words, then the fast loop (linear scan for short words,
// heap for long ones) against the textbook O(n^2) loop on random words and merge tables.
#include <gtest/gtest.h>

#include <random>

#include "model/tokenizer/bpe_merge.h"

namespace moerl::model::hf {
namespace {

// Symbols 0..3 are the letters a b c d; merges build 10 = ab, 11 = bc, 12 = abc (from ab+c), 13 = aa.
MergeTable letters() {
  MergeTable m;
  m.insert(1, 2, /*rank=*/0, 11);   // b c -> bc
  m.insert(0, 1, 1, 10);            // a b -> ab
  m.insert(10, 2, 2, 12);           // ab c -> abc
  m.insert(0, 0, 3, 13);            // a a -> aa
  return m;
}

TEST(BpeMerge, LowestRankFirstThenLeftmost) {
  const MergeTable m = letters();
  std::vector<int32_t> w = {0, 1, 2};  // "abc": b c (rank 0) beats a b (rank 1); ab+c never forms
  merge_word(w, m);
  EXPECT_EQ(w, (std::vector<int32_t>{0, 11}));
  w = {0, 1, 3, 2};  // "abdc": only a b merges
  merge_word(w, m);
  EXPECT_EQ(w, (std::vector<int32_t>{10, 3, 2}));
  w = {0, 1, 0, 1, 2};  // "ababc": b c first, then the leftmost a b
  merge_word(w, m);
  EXPECT_EQ(w, (std::vector<int32_t>{10, 0, 11}));
  w = {0, 0, 0};  // "aaa": the leftmost a a merges, the last a stays
  merge_word(w, m);
  EXPECT_EQ(w, (std::vector<int32_t>{13, 0}));
  w = {3};
  merge_word(w, m);
  EXPECT_EQ(w, (std::vector<int32_t>{3}));
}

TEST(BpeMerge, LaterDuplicateMergeReplacesEarlier) {
  MergeTable m;
  m.insert(0, 1, 5, 7);
  m.insert(0, 1, 9, 8);
  EXPECT_EQ(m.size(), 1u);
  EXPECT_EQ(m.find(0, 1)->new_id, 8);
  EXPECT_EQ(m.find(0, 1)->rank, 9u);
  EXPECT_EQ(m.find(1, 0), nullptr);
}

// A random vocabulary over `alphabet` symbols: each merge joins two existing symbols into a
// new one; ranks are a random permutation, so merge order is not creation order.
MergeTable random_merges(std::mt19937& rng, int32_t alphabet, int32_t num_merges) {
  MergeTable m;
  std::vector<uint32_t> ranks(static_cast<size_t>(num_merges));
  for (size_t i = 0; i < ranks.size(); ++i) ranks[i] = static_cast<uint32_t>(i);
  std::shuffle(ranks.begin(), ranks.end(), rng);
  int32_t next = alphabet;
  for (int32_t k = 0; k < num_merges; ++k) {
    std::uniform_int_distribution<int32_t> pick(0, next - 1);
    int32_t a = pick(rng), b = pick(rng);
    if (m.find(a, b)) continue;
    m.insert(a, b, ranks[static_cast<size_t>(k)], next++);
  }
  return m;
}

TEST(BpeMerge, FastLoopEqualsNaiveLoopOnRandomWords) {
  std::mt19937 rng(7);
  for (int table = 0; table < 20; ++table) {
    const int32_t alphabet = 2 + table % 5;  // few symbols: long merge chains
    const MergeTable m = random_merges(rng, alphabet, 60);
    for (int word = 0; word < 200; ++word) {
      // Lengths on both sides of the linear-scan limit (64) and far past it.
      const size_t len = word % 4 == 0 ? 1 + rng() % 400 : 1 + rng() % 70;
      std::vector<int32_t> w(len);
      for (auto& s : w) s = static_cast<int32_t>(rng() % static_cast<uint32_t>(alphabet));
      std::vector<int32_t> fast = w, naive = w;
      merge_word(fast, m);
      merge_word_naive(naive, m);
      ASSERT_EQ(fast, naive) << "table " << table << " word " << word << " of " << len << " symbols";
    }
  }
}

TEST(BpeMerge, LongWordIsFast) {
  // 200k symbols through the heap: O(n log n), well under a second even on a loaded machine.
  MergeTable m;
  m.insert(0, 0, 0, 1);
  m.insert(1, 1, 1, 2);
  m.insert(2, 2, 2, 3);
  std::vector<int32_t> w(200000, 0);
  merge_word(w, m);
  ASSERT_EQ(w.size(), 25000u);
  for (int32_t s : w) ASSERT_EQ(s, 3);
}

}  // namespace
}  // namespace moerl::model::hf
