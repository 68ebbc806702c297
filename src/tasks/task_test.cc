// Task helpers: answer extraction, stable hashing (pinned values), RNG, index permutation.
#include "tasks/task.h"

#include <set>

#include <gtest/gtest.h>

namespace moerl::tasks {
namespace {

TEST(AnswerText, FirstLineTrimmed) {
  EXPECT_EQ(answer_text("  46 \r\nmore text"), "46");
  EXPECT_EQ(answer_text("\t1234"), "1234");
  EXPECT_EQ(answer_text("\n46"), "");
  EXPECT_EQ(answer_text(""), "");
}

// Values computed independently (Python) from the definition: FNV-1a 64 + SplitMix64 finaliser.
TEST(StableHash, PinnedValues) {
  EXPECT_EQ(stable_hash(""), 0xc3817c016ba4ff30ULL);
  EXPECT_EQ(stable_hash("12+34="), 0x887ef15a6eefd662ULL);
}

TEST(HeldOut, FractionIsRoughlyRespected) {
  int held = 0;
  for (int i = 0; i < 20000; ++i) held += is_held_out("p" + std::to_string(i), 0.1);
  EXPECT_GT(held, 1700);
  EXPECT_LT(held, 2300);
  EXPECT_FALSE(is_held_out("anything", 0.0));
}

TEST(Rng, DeterministicAndInRange) {
  Rng a{1, 2, 3}, b{1, 2, 3}, c{1, 2, 4};
  std::vector<uint64_t> va, vc;
  for (int i = 0; i < 5; ++i) {
    uint64_t x = a.next();
    EXPECT_EQ(x, b.next());
    va.push_back(x);
    vc.push_back(c.next());
  }
  EXPECT_NE(va, vc);
  Rng r{7};
  std::set<int64_t> seen;
  for (int i = 0; i < 2000; ++i) {
    int64_t v = r.uniform(-3, 4);
    ASSERT_GE(v, -3);
    ASSERT_LE(v, 4);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 8u);
}

TEST(PermuteIndex, IsABijection) {
  for (uint64_t n : {1u, 2u, 3u, 7u, 64u, 100u, 1000u}) {
    std::set<uint64_t> out;
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t p = permute_index(i, n, 42);
      ASSERT_LT(p, n);
      out.insert(p);
    }
    EXPECT_EQ(out.size(), n);
  }
  int moved = 0;
  for (uint64_t i = 0; i < 100; ++i) moved += permute_index(i, 100, 1) != permute_index(i, 100, 2);
  EXPECT_GT(moved, 50);
}

}  // namespace
}  // namespace moerl::tasks
